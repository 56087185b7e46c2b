"""Idempotency-Key (SPEC addition; the SDKs never send it, so raw HTTP is used).

The reference server ignores the header, so every test here is SPEC-only.
"""

from conftest import marker, spec_only

HI = {"messages": [{"type": "human", "content": "hi"}]}


async def test_retried_run_creation_replays_the_recorded_response(http, thread):
    tid = thread["thread_id"]
    key = marker()
    body = {"assistant_id": "echo", "input": HI}
    first = await http.post(f"/threads/{tid}/runs", json=body, headers={"Idempotency-Key": key})
    assert first.status_code == 200
    second = await http.post(f"/threads/{tid}/runs", json=body, headers={"Idempotency-Key": key})
    with spec_only("SPEC: a retried request with the same Idempotency-Key replays the recorded response"):
        assert second.status_code == 200
        assert second.json()["run_id"] == first.json()["run_id"]
        runs = (await http.get(f"/threads/{tid}/runs")).json()
        assert [r["run_id"] for r in runs] == [first.json()["run_id"]]


async def test_same_key_with_a_different_body_is_refused(http, thread):
    tid = thread["thread_id"]
    key = marker()
    first = await http.post(f"/threads/{tid}/runs", json={"assistant_id": "echo", "input": HI},
                            headers={"Idempotency-Key": key})
    assert first.status_code == 200
    other = await http.post(f"/threads/{tid}/runs", json={"assistant_id": "steps", "input": {"n": 1}},
                            headers={"Idempotency-Key": key})
    with spec_only("SPEC: reusing an Idempotency-Key with a different body is refused"):
        assert other.status_code in (409, 422)


async def test_different_keys_create_different_runs(http, thread):
    tid = thread["thread_id"]
    body = {"assistant_id": "echo", "input": HI}
    a = await http.post(f"/threads/{tid}/runs", json=body, headers={"Idempotency-Key": marker()})
    b = await http.post(f"/threads/{tid}/runs", json=body, headers={"Idempotency-Key": marker()})
    assert a.status_code == b.status_code == 200
    assert a.json()["run_id"] != b.json()["run_id"]


async def test_stateless_wait_is_replayed_too(http):
    key = marker()
    body = {"assistant_id": "echo", "input": HI}
    first = await http.post("/runs/wait", json=body, headers={"Idempotency-Key": key})
    second = await http.post("/runs/wait", json=body, headers={"Idempotency-Key": key})
    assert first.status_code == 200 and second.status_code == 200
    assert second.json() == first.json()
    with spec_only("SPEC: the replay names the same run"):
        assert second.headers["content-location"] == first.headers["content-location"]
