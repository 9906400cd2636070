"""The order tools' command: `lookup` reads lib/orders.json, `refund` records a refund in the
session workspace (refunds.jsonl). Reads {"input": ..., "context": ...} on stdin, prints JSON."""

import json
import os
import sys


def main() -> int:
    request = json.load(sys.stdin)
    args = request.get("input") or {}
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "orders.json"), encoding="utf-8") as f:
        orders = json.load(f)
    order = orders.get(args.get("order_id", ""))
    if order is None:
        print(f"no order {args.get('order_id')!r}", file=sys.stderr)
        return 1
    if sys.argv[1] == "lookup":
        print(json.dumps(order))
        return 0
    if args["amount"] > order["total"]:
        print(f"cannot refund {args['amount']}: the order total is {order['total']}", file=sys.stderr)
        return 1
    record = {"order_id": args["order_id"], "amount": args["amount"], "reason": args["reason"]}
    workspace = os.environ.get("BDK_WORKSPACE_DIR")
    if workspace:
        with open(os.path.join(workspace, "refunds.jsonl"), "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
    print(json.dumps({"refunded": True, **record}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
