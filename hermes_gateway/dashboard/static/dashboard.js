// Small progressive enhancement: a form marked data-confirm asks first. Without JavaScript it submits as is.
document.addEventListener("submit", function (event) {
  var form = event.target;
  var question = form.getAttribute && form.getAttribute("data-confirm");
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});
