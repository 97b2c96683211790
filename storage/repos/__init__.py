"""One repository per storage role of `hermes_engine.ports.storage`, each a mixin over `SqlRepository`;
`storage.store.SqlStore` composes them into the whole `Store`."""
