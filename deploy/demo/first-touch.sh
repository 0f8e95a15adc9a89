#!/usr/bin/env bash
# The first touch of sagalog, as `make demo` runs it until the reference workflow lands:
# apply the topology, publish two events of one workflow, read them back decoded.
set -euo pipefail
cd "$(dirname "$0")/../.."
sagalog=${SAGALOG:-.venv/bin/sagalog}
workflow="demo-$(date +%s)"

echo "== sagalog topology apply"
# Exit 4 means it refused something destructive (a stray topic, a partition change)
# after making every safe change; the demo goes on and says so.
status=0
$sagalog topology apply || status=$?
if [ "$status" -ne 0 ] && [ "$status" -ne 4 ]; then exit "$status"; fi
echo
echo "== sagalog publish (workflow $workflow)"
first=$($sagalog publish procurement.events procurement.v1.RequestSubmitted \
  @deploy/demo/request_submitted.json --workflow-id "$workflow" --source demo/requester)
echo "$first"
cause=$(echo "$first" | python3 -c 'import json,sys; print(json.load(sys.stdin)["headers"]["ce_id"])')
$sagalog publish procurement.events procurement.v1.BudgetReserved \
  @deploy/demo/budget_reserved.json --workflow-id "$workflow" --causation-id "$cause" \
  --source demo/budget-agent
echo
echo "== sagalog tail procurement.events --workflow $workflow"
$sagalog tail procurement.events --workflow "$workflow" --max 2 --idle-timeout 15
echo
echo "A bad event is refused with the field named:"
$sagalog publish procurement.events procurement.v1.BudgetReserved \
  '{"reservation_id": "RES-1", "cost_centre": "X", "amount": "1.005", "currency": "EUR"}' \
  || true
echo
echo "The local stack is still running: \`make down\` stops it."
