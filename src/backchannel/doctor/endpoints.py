"""Doctor's check of a profile's model endpoint: an openai engine's answers `/models` with the key and lists the
model; a hermes engine's Hermes API server answers its session list with the key."""

from __future__ import annotations

from pathlib import Path

from ..agent.engines.openai import OpenAIEngine
from ..errors import ConfigError, EngineError
from ..home import config
from ..home.profiles import Profile
from .report import Check, fail, ok, warn

TIMEOUT = 3.0
SHOWN_MODELS = 5


async def endpoint(root: Path, profile: Profile) -> list[Check]:
    check = f"endpoint {profile.name}"
    model = profile.config.model
    cfg = repr(str(profile.path / "config.yaml"))
    assert model.base_url is not None  # the openai engine requires one (checked when the config was parsed)
    checks: list[Check] = []
    key = _key(root, model.api_key_env)
    if model.api_key_env and not key:
        checks.append(
            warn(
                check,
                f"model.api_key_env names {model.api_key_env}, which is set neither in .env nor in the "
                "environment: requests go without a key",
                f"add {model.api_key_env}=... to {str(config.env_path(root))!r}",
            )
        )
    if not model.model:
        checks.append(fail(check, f"no model name in {cfg}", f"set model.default in {cfg}"))
    engine = OpenAIEngine(profile=profile.name, base_url=model.base_url, model=model.model, api_key=key)
    try:
        listed = await engine.list_models(timeout=TIMEOUT)
    except EngineError as exc:
        if exc.code == "endpoint_auth":
            fix = f"check {model.api_key_env or 'model.api_key_env'} in .env"
            return [*checks, fail(check, exc.message, fix)]
        if exc.code == "no_model_list":
            detail = f"{exc.message}: the model name could not be checked"
            return [*checks, warn(check, detail, "none needed if chats work; otherwise check model.base_url")]
        fix = f"start the server, or correct model.base_url in {cfg}"
        return [*checks, fail(check, exc.message, fix)]
    finally:
        await engine.aclose()
    if model.model and model.model not in listed:
        shown = ", ".join(listed[:SHOWN_MODELS]) + (", …" if len(listed) > SHOWN_MODELS else "")
        detail = f"{model.base_url} answers, but model {model.model!r} is not among those it lists ({shown or 'none'})"
        return [*checks, warn(check, detail, f"set model.default in {cfg} to a listed model, or pull it")]
    if model.model:
        checks.append(ok(check, f"{model.base_url} answers and lists model {model.model!r}"))
    return checks


async def hermes_endpoint(root: Path, profile: Profile) -> list[Check]:
    """A hermes-engine profile: its key is set, and its Hermes API server answers with it."""
    from ..net.hermes import HermesClient

    check = f"endpoint {profile.name}"
    model = profile.config.model
    assert model.base_url is not None  # the hermes engine requires one (checked when the config was parsed)
    env = str(config.env_path(root))
    key = _key(root, model.api_key_env)
    if not key:
        named = model.api_key_env or "model.api_key_env"
        return [
            fail(
                check,
                f"no key for the Hermes API server at {model.base_url}: {named} is set neither in .env nor in the"
                " environment (Hermes refuses a request without its API_SERVER_KEY)",
                f"add {model.api_key_env or 'HERMES_API_KEY'}=<that Hermes home's API_SERVER_KEY> to {env!r}"
                + ("" if model.api_key_env else " and name it in model.api_key_env"),
            )
        ]
    client = HermesClient(
        model.base_url,
        key,
        who=f"Hermes at {model.base_url}",
        error=EngineError,
        timeout=TIMEOUT,
        profile=model.profile,
    )
    try:
        await client.sessions(limit=1)
        asks = await client.runs_replay() and await client.approvals()
    except EngineError as exc:
        refused = "401" in exc.message or "403" in exc.message
        fix = (
            f"check {model.api_key_env} in {env!r} against that Hermes home's API_SERVER_KEY"
            if refused
            else f"start it (`hermes gateway run`, with its API server on), or correct model.base_url in"
            f" {str(profile.path / 'config.yaml')!r}"
        )
        return [fail(check, exc.message, fix)]
    finally:
        await client.aclose()
    approvals = (
        "a dangerous command its turn wants to run is asked of you (`backchannel ask`)"
        if asks
        else "it asks no approval of a dangerous command through its API server (Hermes before 0.21: the command"
        " is refused there without asking)"
    )
    return [ok(check, f"Hermes at {model.base_url} answers with the key in {model.api_key_env}; {approvals}")]


def _key(root: Path, name: str | None) -> str | None:
    """The secret `name` names (the home's .env, then the environment); None when unset or unreadable."""
    if not name:
        return None
    try:
        return config.secret_value(root, name)
    except ConfigError:
        return None  # .env's own check says what is wrong with it
