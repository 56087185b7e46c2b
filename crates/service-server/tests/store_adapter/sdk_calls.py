"""The Python SDK's store calls against the server at argv[1]; prints what it got."""

import json
import sys

from langgraph_sdk import get_sync_client

client = get_sync_client(url=sys.argv[1])
store = client.store
for user, key, n in [("u1", "a", 1), ("u1", "b", 2), ("u2", "c", 3), ("u2", "d", 4)]:
    store.put_item(["notes", user], key, {"text": f"note {key}", "n": n})
report = {
    "wildcard": [i["key"] for i in store.search_items(["notes", "*"], filter={"n": {"$gt": 1}}, limit=2, offset=1)["items"]],
    "namespaces": store.list_namespaces(prefix=["notes"], max_depth=2)["namespaces"],
    "roots": store.list_namespaces(max_depth=1)["namespaces"],
    "got": store.get_item(["notes", "u1"], "b")["value"],
}
store.delete_item(["notes", "u2"], "d")
report["after_delete"] = [i["key"] for i in store.search_items(["notes"], limit=10)["items"]]
print(json.dumps(report))
