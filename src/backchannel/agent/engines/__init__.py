"""Engines by name, built from a profile's model config."""

from __future__ import annotations

from collections.abc import Callable

from ...home.profiles import Profile
from .base import Engine, ModelRequest, OnDelta, SessionLink, ToolSpec
from .echo import EchoEngine

__all__ = ["Engine", "ModelRequest", "OnDelta", "SessionLink", "ToolSpec", "build_engine"]


def build_engine(profile: Profile, secret: Callable[[str], str | None]) -> Engine:
    """The engine a profile's config names; `secret` looks up the API key variable."""
    model = profile.config.model
    if model.engine == "openai":
        from .openai import OpenAIEngine  # imported on use: the echo path never loads the HTTP client

        assert model.base_url is not None  # checked when the profile config was parsed
        return OpenAIEngine(
            profile=profile.name,
            base_url=model.base_url,
            model=model.model,
            api_key=secret(model.api_key_env) if model.api_key_env else None,
            timeout_seconds=model.timeout_seconds,
        )
    if model.engine == "hermes":
        from .hermes import HermesEngine

        assert model.base_url is not None  # checked when the profile config was parsed
        return HermesEngine(
            profile=profile.name,
            base_url=model.base_url,
            api_key=secret(model.api_key_env) if model.api_key_env else None,
            api_key_env=model.api_key_env,
            hermes_profile=model.profile,
            timeout_seconds=model.timeout_seconds,
            approval_seconds=model.approval_seconds,
        )
    return EchoEngine(profile=profile.name)
