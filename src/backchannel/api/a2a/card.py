"""A profile's agent card: its name, what its SOUL.md says first, its skills, and how to call it."""

from __future__ import annotations

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from google.protobuf.json_format import ParseDict

from ... import __version__, a2a_extension
from ...agent import persona
from ...home.profiles import Profile

SCHEME = "bearer"
PROTOCOL_VERSION = "1.0"
COMPAT_VERSION = "0.3"  # the SDK's adapters answer 0.3 clients at the same URLs
BINDINGS = (("JSONRPC", "jsonrpc"), ("HTTP+JSON", "rest"))
MAX_DESCRIPTION_CHARS = 1000


def agent_card(profile: Profile, base: str) -> AgentCard:
    """The card a stranger may read: nothing of the profile's memories, sessions or configuration.

    `base` is the profile's A2A root (`.../a2a`): JSON-RPC at `base/jsonrpc`, REST at `base/rest`, each in
    1.0 and, after those, 0.3 (a 1.0 client picks 1.0; a 0.3 client reads the card's 0.3 form)."""
    return AgentCard(
        name=profile.name,
        description=description(persona.read_text(profile.soul_path)) or f"The Backchannel agent {profile.name}.",
        version=__version__,
        supported_interfaces=[
            AgentInterface(url=f"{base}/{path}", protocol_binding=binding, protocol_version=version)
            for version in (PROTOCOL_VERSION, COMPAT_VERSION)
            for binding, path in BINDINGS
        ],
        capabilities=AgentCapabilities(
            streaming=True,
            push_notifications=True,  # delivered from the store's outbox, retried (core.pushes)
            extensions=[ParseDict(a2a_extension.card_entry(), AgentExtension())],
        ),
        security_schemes={
            SCHEME: SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer", description="the person's API_SERVER_KEY, or a peer key (backchannel key create)"
                )
            )
        },
        security_requirements=[SecurityRequirement(schemes={SCHEME: StringList()})],
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(id=s.name, name=s.name, description=s.description or s.name, tags=[s.name])
            for s in persona.skills(profile)
        ],
    )


def description(soul: str) -> str:
    """The first paragraph of SOUL.md that is not a heading, on one line."""
    for paragraph in soul.replace("\r\n", "\n").split("\n\n"):
        lines = [line.strip() for line in paragraph.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        if lines:
            return " ".join(lines)[:MAX_DESCRIPTION_CHARS]
    return ""
