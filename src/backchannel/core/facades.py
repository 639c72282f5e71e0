"""What the surfaces (the HTTP API, the web view, A2A, MCP) reach of a gateway: five named facades, each the few
calls of one job, so no surface reaches into the composition root's services.

    messages   the person's door, the runs a message starts (hand in, follow, steer, stop, read), A2A push
               configs, and the person's runs on peer gateways
    roster     who and where: the home's profiles, their sessions and Bot Chats, the peers, what a session said
    keys       who a request is (its key), and the person's keys made, rotated, revoked; the web view's logouts
    admin      what only the person does besides: held messages approved or denied, questions answered, the rooms,
               the metrics
    hosting    the tools and chat hand-offs of agents hosted in a Hermes gateway (its plugin's routes, MCP)

Besides these a surface uses only the gateway's own life: `root`, `settings`, `shared`, `running_turns`, `open`,
`start`, `stop`, `aclose` (tests/test_architecture.py keeps it so). Each facade names the services' own methods
(bound here once); the few that are more than one call are written out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..home.peers import Peer
from ..transcript import Line, Round
from .delivery import probe

if TYPE_CHECKING:
    from .access import Access
    from .delivery.delivery import Delivery
    from .delivery.directory import Directory
    from .delivery.door import Door
    from .delivery.holds import Holds
    from .delivery.imports import Imports
    from .delivery.outbound import Outbound
    from .handoffs import ChatHandoffs
    from .hosted import HostedTools
    from .metrics import Metrics
    from .pushes import Pushes
    from .questions import Questions
    from .revocations import Revocations
    from .rooms import Rooms


class Messages:
    """A message handed in (the one door, or a session's run), its run followed, steered, stopped and read; the
    A2A push configs of a caller's tasks; the question a run asked, answered by its sender over A2A (the surface
    checks the run is the caller's); the person's runs on a peer gateway."""

    def __init__(
        self, door: Door, delivery: Delivery, outbound: Outbound, pushes: Pushes, questions: Questions
    ) -> None:
        self.send = door.send  # to any address: a session, a peer's agent, a group
        self.addressed = door.session  # the session a local address names (made or imported as a send would)
        self.deliver = delivery.deliver
        self.submit = delivery.submit
        self.reserve_events = delivery.reserve_events
        self.steer = delivery.steer
        self.stop = delivery.stop
        self.wait = delivery.wait
        self.watch = delivery.watch
        self.run = delivery.run
        self.runs = delivery.runs
        self.runs_ahead = delivery.runs_ahead
        self.a2a_tasks = delivery.a2a_tasks
        self.status = delivery.status
        self.find_run = delivery.find_run
        self.run_id_of = delivery.run_id_of
        self.files = delivery.files
        self.load = delivery.load
        self.ledger = delivery.ledger
        self.exchange = delivery.exchange
        self.note_bad_request = delivery.note_bad_request
        self.pushes = pushes  # the A2A push notification configs (the A2A handler's PushConfigs)
        self.asked = questions.of_run
        self.answer = questions.answer
        self.decline = questions.cancel
        self.peer = outbound.peer
        self.probe_peer = delivery.probe_peer
        self.peer_run = outbound.run
        self.peer_status = outbound.status
        self.stop_peer_run = outbound.stop
        self.follow_peer_run = outbound.follow
        self._outbound = outbound

    async def examine(self, peer: Peer) -> probe.Found:
        """What answers at a peer's URL, asked before it is added (nothing saved)."""
        return await probe.examine(self._outbound, peer)


class Roster:
    """Who and where: the home's profiles, their sessions and Bot Chats (a Hermes gateway's made addressable), the
    peers, and what a session said."""

    def __init__(self, directory: Directory, imports: Imports) -> None:
        self.check_profile = directory.check_profile
        self.profile = directory.profile
        self.profiles = directory.profiles
        self.peers = directory.peers
        self.session = directory.session
        self.known = directory.known
        self.sessions = directory.sessions
        self.existing = directory.existing
        self.find = directory.find
        self.create_session = directory.create_session
        self.unsaved_session = directory.unsaved_session
        self.messages = directory.messages
        self.bot_chat = directory.bot_chat
        self.open_bot_chat = directory.open_bot_chat
        self.retire_bot_chat = directory.retire_bot_chat
        self.context_ids = directory.context_ids
        self.context_session = directory.context_session
        self.imported = imports.sessions  # a profile's Hermes gateway's sessions, made addressable here


class Keys:
    """Who a request is (its key, and while that key stays valid), the person's keys, and the web view's logouts."""

    def __init__(self, access: Access, revocations: Revocations) -> None:
        self.identify = access.identify
        self.while_valid = access.while_valid
        self.keys = access.keys
        self.create = access.create
        self.rotate = access.rotate
        self.revoke = access.revoke
        self.for_agent = access.for_agent
        self.revocations = revocations  # the web view's logouts (its auth writes and reads them)


class Admin:
    """What only the person does besides sending: held messages approved or denied, the questions turns asked them
    answered or declined, the rooms (a line said there is
    driven by this process when it works the rooms), the gateway's metrics (None: built without them)."""

    def __init__(
        self,
        holds: Holds,
        questions: Questions,
        rooms: Rooms,
        metrics: Metrics | None,
        said_in: Callable[[str], None],
    ) -> None:
        self.held = holds.held
        self.approve = holds.approve
        self.deny = holds.deny
        self.questions = questions.listed
        self.question = questions.get
        self.answer = questions.answer
        self.decline = questions.cancel
        self.rooms = rooms.every
        self.room = rooms.get
        self.transcript = rooms.transcript
        self.round = rooms.round
        self.create_room = rooms.create
        self.add_members = rooms.add
        self.remove_members = rooms.remove
        self.metrics = metrics
        self._rooms = rooms
        self._said_in = said_in

    async def say_in_room(self, name: str, text: str, *, sender: str) -> tuple[Line, Round]:
        """The person's line in room `name` and the round it opens, which the gateway then drives."""
        said = await self._rooms.say(name, text, sender=sender)
        self._said_in(name)
        return said


class Hosting:
    """The agents hosted in a Hermes gateway: their messaging tools called as their turn in progress, the mentions
    of a message answered, and the profile's turns handed to that gateway's chats."""

    def __init__(self, hosted: HostedTools, handoffs: ChatHandoffs) -> None:
        self.call = hosted.call
        self.mentions = hosted.mentions
        self.take = handoffs.take
        self.handoff = handoffs.get
        self.settle = handoffs.settle
