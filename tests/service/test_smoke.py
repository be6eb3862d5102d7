import pytest

from a2a_endpoint.testing import user_message

pytestmark = [pytest.mark.django_db(transaction=True)]


async def test_send_echo(rpc):
    result = await rpc.result("SendMessage", {"message": user_message("echo hello")})
    task = result["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"] == [{"text": "hello"}]
