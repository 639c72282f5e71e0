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
# What a message's parts may be (a part of another media type is ContentTypeNotSupported): text, JSON data, and
# files of these types (kept with the run and named to the agent). Replies are text, and JSON data when the
# engine gives structured output.
INPUT_MODES = (
    "text/plain",
    "text/markdown",
    "text/csv",
    "text/html",
    "application/json",
    "application/pdf",
    "application/octet-stream",
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
)
OUTPUT_MODES = ("text/plain", "application/json")
CHAT_SKILL = "chat"


def agent_card(profile: Profile, base: str) -> AgentCard:
    """The card a stranger may read: nothing of the profile's memories, sessions or configuration.

    `base` is the profile's A2A root (`.../a2a`): JSON-RPC at `base/jsonrpc`, REST at `base/rest`, each in
    1.0 and, after those, 0.3 (a 1.0 client picks 1.0; a 0.3 client reads the card's 0.3 form). A profile
    without skills of its own has one, `chat` (the card's skills are required, and a client lists them)."""
    about = description(persona.read_text(profile.soul_path)) or f"The Backchannel agent {profile.name}."
    skills = [
        AgentSkill(id=s.name, name=s.name, description=s.description or s.name, tags=[s.name])
        for s in persona.skills(profile)
    ] or [AgentSkill(id=CHAT_SKILL, name=CHAT_SKILL, description=about, tags=[CHAT_SKILL])]
    return AgentCard(
        name=profile.name,
        description=about,
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
        default_input_modes=list(INPUT_MODES),
        default_output_modes=list(OUTPUT_MODES),
        skills=skills,
    )


def description(soul: str) -> str:
    """The first paragraph of SOUL.md that is not a heading, on one line."""
    for paragraph in soul.replace("\r\n", "\n").split("\n\n"):
        lines = [line.strip() for line in paragraph.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        if lines:
            return " ".join(lines)[:MAX_DESCRIPTION_CHARS]
    return ""
