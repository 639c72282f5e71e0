"""The address grammar: `parse`, `parse_remote` and `mentions`.

Contract: DESIGN.md section 3 and the docstring of `backchannel.addresses`:

    local   := session-id | profile "/" session-id | profile        (profile alone = its Bot Chat)
    remote  := "peer:" peer [ "/" profile [ "/" session-id ] ]       (the `peer` CLI verbs leave out "peer:")
    mention := "@session:" local | "@peer:" peer [ "/" profile ]

Profile and peer names match ^[a-z0-9][a-z0-9_-]{0,63}$. A text that is not an address is a usage
error (`invalid_address`, exit 2, HTTP 400) whose message names the text as written.
"""

from __future__ import annotations

import pytest

from backchannel import addresses
from backchannel.addresses import LocalAddress, Mention, RemoteAddress, mentions, parse, parse_remote
from backchannel.errors import UsageError

pytestmark = pytest.mark.quick  # pure: no home on disk, no process, no gateway (make quick)

SID = "20261130_015530_55cf9b"


# --- local addresses --------------------------------------------------------------------------------


def test_a_profile_alone_names_its_bot_chat() -> None:
    assert parse("research") == LocalAddress(profile="research")
    assert parse("  research \n") == LocalAddress(profile="research")  # surrounding blanks are not part of it
    assert parse("a") == LocalAddress(profile="a")
    assert parse("x" * 64) == LocalAddress(profile="x" * 64)
    assert parse("build-bot_2") == LocalAddress(profile="build-bot_2")


def test_profile_slash_session_names_one_session() -> None:
    address = parse(f"research/{SID}")
    assert address == LocalAddress(profile="research", session_id=SID)
    assert str(address) == f"research/{SID}"
    assert parse("research/my-session.1") == LocalAddress(profile="research", session_id="my-session.1")


def test_a_bare_session_id_is_one_local_address_looked_up_later() -> None:
    # A generated id also fits the profile-name pattern: it is one local token, resolved across profiles
    # by the directory; either way it is local, has no second part and reads back as written.
    address = parse(SID)
    assert isinstance(address, LocalAddress)
    assert {address.profile, address.session_id} == {SID, None}
    assert str(address) == SID
    # An id that cannot be a profile name (upper case, a dot) can only be a session id.
    assert parse("My-Session.1") == LocalAddress(session_id="My-Session.1")


# --- remote addresses -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("peer:spark", RemoteAddress(peer="spark")),
        ("peer:spark/builds", RemoteAddress(peer="spark", profile="builds")),
        (f"peer:spark/builds/{SID}", RemoteAddress(peer="spark", profile="builds", session_id=SID)),
        ("peer:spark/Research", RemoteAddress(peer="spark", profile="Research")),  # a Hermes profile may be upper case
        ("  peer:spark/builds  ", RemoteAddress(peer="spark", profile="builds")),
    ],
)
def test_peer_forms(text: str, expected: RemoteAddress) -> None:
    assert parse(text) == expected
    assert parse_remote(text.strip().removeprefix("peer:")) == expected  # the `peer` verbs' form
    assert str(expected) == text.strip()
    assert parse(str(expected)) == expected


# --- errors -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "Bad Name!",
        "-research",
        "research/",
        "/" + SID,
        "a/b/c",
        f"Research/{SID}",  # a local profile name is lower case
        "research/bad id",
        "research/.hidden",
        "x" * 65 + "/" + SID,
        "peer:",
        "peer:Spark",
        "peer:-spark",
        "peer:spark/",
        "peer:spark/bad!",
        "peer:spark/builds/bad id",
        f"peer:spark/builds/{SID}/more",
    ],
)
def test_every_malformed_address_is_an_invalid_address_naming_the_text(text: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse(text)
    error = caught.value
    assert error.code == "invalid_address"
    assert (error.exit_code, error.http_status) == (2, 400)
    assert repr(text) in error.message, error.message


@pytest.mark.parametrize("text", ["", "Spark", "spark/bad!", "spark/a/bad id", f"spark/a/{SID}/b", "spark//x"])
def test_parse_remote_errors_name_the_text(text: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_remote(text)
    assert caught.value.code == "invalid_address"
    assert repr(text) in caught.value.message, caught.value.message


def test_an_error_names_what_is_wrong() -> None:
    with pytest.raises(UsageError, match="'Research' is not a profile name"):
        parse(f"Research/{SID}")
    with pytest.raises(UsageError, match="'bad id' is not a session id"):
        parse("research/bad id")
    with pytest.raises(UsageError, match="'Spark' is not a peer name"):
        parse("peer:Spark")


# --- mentions ---------------------------------------------------------------------------------------


def test_a_mention_is_taken_out_of_the_prompt() -> None:
    text, found = mentions("ask @session:research what is new")
    assert text == "ask what is new"
    assert found == [Mention(token="@session:research", address=LocalAddress(profile="research"))]


def test_mention_forms() -> None:
    _, found = mentions(f"@session:research/{SID} @session:{SID} @peer:spark @peer:spark/builds")
    assert [m.address for m in found] == [
        LocalAddress(profile="research", session_id=SID),
        parse(SID),
        RemoteAddress(peer="spark"),
        RemoteAddress(peer="spark", profile="builds"),
    ]
    tokens = [f"@session:research/{SID}", f"@session:{SID}", "@peer:spark", "@peer:spark/builds"]
    assert [m.token for m in found] == tokens


@pytest.mark.parametrize(
    ("prompt", "token", "rest"),
    [
        ("did @session:builds, finish?", "@session:builds", "did , finish?"),
        ("ask @session:builds.", "@session:builds", "ask ."),
        (f"see @session:research/{SID}. ok", f"@session:research/{SID}", "see . ok"),
        ("(ask @peer:spark)", "@peer:spark", "(ask )"),
        ("hey @peer:spark/builds!", "@peer:spark/builds", "hey !"),
        ("@session:builds; then stop", "@session:builds", "; then stop"),
        ("is it @session:builds?", "@session:builds", "is it ?"),
    ],
)
def test_trailing_punctuation_is_not_part_of_a_mention(prompt: str, token: str, rest: str) -> None:
    text, found = mentions(prompt)
    assert [m.token for m in found] == [token]
    assert text == rest


def test_a_target_mentioned_twice_is_kept_once() -> None:
    text, found = mentions("@session:builds and @session:builds again, @peer:spark @peer:spark")
    assert [m.token for m in found] == ["@session:builds", "@peer:spark"]
    assert text == "and again,"


def test_two_mentions_of_one_profile_but_different_sessions_are_two() -> None:
    _, found = mentions(f"@session:builds @session:builds/{SID}")
    assert [m.address for m in found] == [
        LocalAddress(profile="builds"),
        LocalAddress(profile="builds", session_id=SID),
    ]


@pytest.mark.parametrize(
    "prompt",
    [
        "look at @session:a/b/c now",  # not an address
        "ask @session:-builds",  # not a name, not an id
        f"ask @peer:spark/builds/{SID}",  # a peer mention names a peer or one of its agents, not a session
        "ask @peer:Spark",
        "ask @session:peer:x",  # a peer address is not a session mention
        "ask @session:peer:spark/builds",
        "ask @peer:spark:x",
    ],
)
def test_a_mention_that_is_not_an_address_is_left_as_written(prompt: str) -> None:
    text, found = mentions(prompt)
    assert found == []
    assert text == prompt


@pytest.mark.parametrize("prompt", ["mail ann@session:builds", "mail ann@peer:spark", "a@@session:builds"])
def test_an_email_like_address_is_not_a_mention(prompt: str) -> None:
    assert mentions(prompt) == (prompt, [])


def test_a_colon_after_a_mention_is_punctuation() -> None:
    text, found = mentions("@session:builds: how far along are you?")
    assert [m.address for m in found] == [LocalAddress(profile="builds")]
    assert text == ": how far along are you?"


def test_a_prompt_without_mentions_is_unchanged() -> None:
    prompt = "plain words: session peer @ nothing"
    assert mentions(prompt) == (prompt, [])


# --- the helpers that build and take apart remote addresses (every `peer:` string goes through them) -----


@pytest.mark.parametrize(
    ("peer", "profile", "address"),
    [
        ("spark", None, "peer:spark"),
        ("spark", "research", "peer:spark/research"),
        ("a-1", "Hermes_2", "peer:a-1/Hermes_2"),
    ],
)
def test_remote_builds_the_address_parse_reads_back(peer: str, profile: str | None, address: str) -> None:
    assert addresses.remote(peer, profile) == address
    assert parse(address) == RemoteAddress(peer=peer, profile=profile)
    assert addresses.is_remote(address) and not addresses.is_remote(address.removeprefix("peer:"))


@pytest.mark.parametrize(
    ("address", "peer", "profile", "path"),
    [
        ("peer:spark", "spark", None, "spark"),
        ("peer:spark/research", "spark", "research", "spark/research"),
        ("peer:spark/research/20260101_120000_abcdef", "spark", "research", "spark/research/20260101_120000_abcdef"),
    ],
)
def test_the_parts_of_a_remote_address_are_those_parse_finds(
    address: str, peer: str, profile: str | None, path: str
) -> None:
    parsed = parse(address)
    assert isinstance(parsed, RemoteAddress)
    assert addresses.peer_of(address) == parsed.peer == peer
    assert addresses.profile_of(address) == parsed.profile == profile
    assert addresses.peer_path(address) == path and parse_remote(path) == parsed
    assert addresses.parse_peer(address) == addresses.parse_peer(path) == parsed


def test_head_and_remote_names_are_a_sender_as_a_whole() -> None:
    assert addresses.head("peer:spark/research") == "peer:spark"
    assert addresses.head("builds/20260101_120000_abcdef") == "builds"
    assert addresses.head("peer:spark") == "peer:spark"
    assert addresses.remote_names("peer:spark/research") == ["peer:spark", "peer:spark/research"]
    assert addresses.remote_names("peer:spark") == ["peer:spark"]
