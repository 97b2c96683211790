#!/usr/bin/env bash
# Print "<action> <address>" for every resource change in a `terraform show -json` plan.
set -euo pipefail
plan="${1:?usage: plan-summary.sh tfplan.json}"
jq -r '.resource_changes[] | "\(.change.actions | join("+")) \(.address)"' "$plan" \
  | sort | uniq -c | sort -rn
