"""The a2a-sdk 0.3 client (what many frameworks still ship) against a gateway, run in its own venv.

`python a2a03_client.py BASE KEY CARD_PATH ASK_0_3 TRANSPORT STREAMING TEXT` fetches the card at BASE +
CARD_PATH (with `A2A-Version: 0.3` on every request when ASK_0_3 is "1"), sends TEXT over TRANSPORT
("JSONRPC" or "HTTP+JSON") and prints JSON: the card it read, the task's state, its context and the text of
its artifacts. It imports nothing of Backchannel (that venv has only the SDK); the tests' side of it is
`venv()` and `run()` below, which need nothing from the SDK.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

PIN = "a2a-sdk==0.3.26"
VENV = Path(__file__).resolve().parent.parent / ".venv-a2a03"  # the Makefile's `a2a03` target makes the same
STAMP = VENV / ".installed"


def venv() -> Path:
    """The 0.3 client's python, its venv made when missing (as `make a2a03` does)."""
    python = VENV / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    if not STAMP.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", PIN], check=True)
        STAMP.touch()
    return python


def run(
    base: str, key: str, *, card_path: str, ask_0_3: bool, transport: str, text: str, streaming: bool = False
) -> Any:
    """What the 0.3 client got (see the module's docstring), or AssertionError with its stderr."""
    args = [str(venv()), __file__, base, key, card_path, "1" if ask_0_3 else "0", transport, str(int(streaming)), text]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


async def _main(base: str, key: str, card_path: str, ask: bool, transport: str, streaming: bool, text: str) -> None:
    import httpx
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
    from a2a.types import Message, Part, Role, Task, TextPart

    headers = {"Authorization": f"Bearer {key}", **({"A2A-Version": "0.3"} if ask else {})}
    async with httpx.AsyncClient(headers=headers, timeout=30, trust_env=False) as http:
        card = await A2ACardResolver(http, base, agent_card_path=card_path).get_agent_card()
        config = ClientConfig(httpx_client=http, supported_transports=[transport], streaming=streaming)
        client = ClientFactory(config).create(card)
        message = Message(role=Role.user, parts=[Part(root=TextPart(text=text))], message_id=uuid.uuid4().hex)
        task: Task | None = None
        async for event in client.send_message(message):
            task = event[0] if isinstance(event, tuple) else task
        assert task is not None, "no task came back"
        said = [p.root.text for a in task.artifacts or [] for p in a.parts if hasattr(p.root, "text")]
        print(
            json.dumps(
                {
                    "card": {"name": card.name, "url": card.url, "protocolVersion": card.protocol_version},
                    "state": task.status.state.value,
                    "contextId": task.context_id,
                    "said": said,
                }
            )
        )


if __name__ == "__main__":
    import asyncio

    b, k, path, ask03, binding, stream, words = sys.argv[1:8]
    asyncio.run(_main(b, k, path, ask03 == "1", binding, stream == "1", words))
