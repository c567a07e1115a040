"""The provider-neutral half of an HTTP inference engine.

A dialect extension subclasses ``HttpEngine`` and supplies three things: ``encode`` (canonical
request -> the dialect's request JSON), ``decoder`` (SSE events -> canonical inference events) and
``auth_headers``. Everything else is shared: provider identity and metadata, the capability
table with config overrides, ``/models`` listing, the retry loop with backoff, and the replay
guard that keeps a retried stream from duplicating output or tool calls.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any, ClassVar, Literal, Protocol

from roder_core.errors import InferenceError
from roder_core.ir import (
    AgentInferenceRequest,
    InferenceEvent,
    MessageDelta,
    ModelProfile,
    ProviderMetadataEvent,
    ReasoningDelta,
)
from roder_core.kernel.services import InferenceProviderMetadata, InferenceTurnContext
from roder_core.providers.catalog import ProviderSpec
from roder_core.providers.failures import ErrorFactory
from roder_core.providers.model_table import builtin_profile, table_row
from roder_core.providers.probe import probe_model_ids
from roder_core.providers.replay import ReplayGuard
from roder_core.providers.retry import RetryPolicy
from roder_core.providers.sse import SSEEvent
from roder_core.providers.transport import HttpTransport, Secret
from roder_core.settings.config import ConfigError
from roder_core.settings.credentials import CredentialsError, CredentialStore

log = logging.getLogger(__name__)

PROFILE_FIELDS = frozenset(ModelProfile.model_fields) - {"id", "provider"}


class WireDecoder(Protocol):
    """Stateful translation of one response's SSE events into canonical events."""

    #: True once the dialect's terminal event arrived (the stream may then be closed).
    done: bool

    def feed(self, event: SSEEvent) -> list[InferenceEvent]: ...

    def finish(self) -> list[InferenceEvent]:
        """Called when the body ended before ``done``: finish leniently or raise stream_dropped."""
        ...


def apply_overrides(profile: ModelProfile, override: Mapping[str, Any] | None, where: str) -> ModelProfile:
    """A profile with a ``[models."provider/model"]`` table applied; wrong keys are errors."""
    if not override:
        return profile
    unknown = sorted(set(override) - PROFILE_FIELDS)
    if unknown:
        raise ConfigError(
            f'config.toml [models."{where}"]: unknown key {unknown[0]!r} (known: {", ".join(sorted(PROFILE_FIELDS))})'
        )
    try:
        return ModelProfile.model_validate({**profile.model_dump(), **override})
    except ValueError as exc:
        raise ConfigError(f'config.toml [models."{where}"]: {exc}') from None


class HttpEngine:
    """Base of the HTTP dialect engines; one instance per configured provider."""

    #: Path of the streaming endpoint, relative to the base URL.
    path: ClassVar[str]
    models_path: ClassVar[str] = "/models"

    def __init__(
        self,
        spec: ProviderSpec,
        env: Mapping[str, str],
        model_overrides: Mapping[str, Mapping[str, Any]] | None = None,
        retry: RetryPolicy | None = None,
        credentials: CredentialStore | None = None,
    ) -> None:
        self.spec = spec
        self._env = env
        self._credentials = credentials
        self.errors = ErrorFactory(spec.name, spec.api_key_env)
        self.key = Secret("")
        #: "env", "oauth", "stored" or None: where ``key`` came from.
        self.key_source: Literal["env", "stored", "oauth"] | None = None
        self.reload_key()
        self.transport = HttpTransport(spec, self.auth_headers, self.errors)
        self.retry = retry or RetryPolicy(max_retries=spec.max_retries)
        self._overrides = dict(model_overrides or {})
        self._served: list[str] | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec.name!r}, {self.spec.base_url!r})"

    def reload_key(self) -> None:
        """Resolve the API key, the one place every engine does: the provider's environment
        variable first, then an OAuth sign-in for this provider (``[auth.NAME]``, ``auth/*/login``),
        then the key stored for this provider id (``roder providers login``,
        ``providers/configure``). Called again when a key is stored while Roder runs."""
        name = self.spec.api_key_env
        source: Literal["env", "stored", "oauth"] | None
        signed_in = self._signed_in()
        if name and self._env.get(name):
            value, source, hint = self._env[name], "env", name
        elif signed_in is not None:
            value, source, hint = signed_in, "oauth", f"the sign-in of `roder providers login` for {self.spec.name}"
        elif self._credentials is not None and (stored := self._credentials.get(self.spec.name)):
            value, source, hint = stored, "stored", f"the key stored by `roder providers login {self.spec.name}`"
        else:
            value, source, hint = "", None, name or ""
        self.key = Secret(value)
        self.key_source = source
        self.errors.use_key(value, hint)

    def _signed_in(self) -> str | None:
        """The stored access token of an OAuth sign-in for this provider (refreshed before use)."""
        if self._credentials is None:
            return None
        try:
            records = self._credentials.all_oauth()
        except CredentialsError:
            return None
        for record in records.values():
            if record.get("provider") == self.spec.name and record.get("access_token"):
                return str(record["access_token"])
        return None

    async def refresh_sign_in(self) -> None:
        """Before a request: a signed-in provider's token is refreshed when it is about to expire."""
        if self.key_source != "oauth" or self._credentials is None:
            return
        from roder_core.auth.logins import fresh_access_token
        from roder_core.auth.oauth import OAuthError

        try:
            token = await fresh_access_token(self._credentials, self.spec.name)
        except OAuthError as exc:
            raise self.errors.make("auth", str(exc), f"sign in again: `roder providers login` ({exc})", retryable=False) from None
        if token and token != self.key.reveal():
            self.key = Secret(token)
            self.errors.use_key(token, f"the sign-in for {self.spec.name}")

    # ------------------------------------------------------------------ dialect hooks

    def auth_headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.key.reveal()}"} if self.key else {}

    def encode(self, request: AgentInferenceRequest, profile: ModelProfile) -> dict[str, Any]:
        raise NotImplementedError

    def decoder(self) -> WireDecoder:
        raise NotImplementedError

    def request_headers(self, body: dict[str, Any], profile: ModelProfile) -> dict[str, str]:
        """Headers one request needs beyond the provider's own (a beta the body relies on)."""
        return {}

    def parse_model_ids(self, data: Any) -> list[str]:
        """Model ids from a ``GET /models`` answer (OpenAI and Anthropic both use ``data[].id``)."""
        rows = data.get("data", []) if isinstance(data, dict) else []
        return [str(row["id"]) for row in rows if isinstance(row, dict) and row.get("id")]

    # ------------------------------------------------------------------ identity

    def id(self) -> str:
        return self.spec.name

    @property
    def needs_key(self) -> bool:
        """Providers with a key variable need a key (unless the user's own table made it optional
        and it is unset); so does any provider a key was stored for."""
        if self.spec.key_optional:
            return self.key_source is not None
        return self.spec.api_key_env is not None or self.key_source in ("stored", "oauth")

    def metadata(self) -> InferenceProviderMetadata:
        return InferenceProviderMetadata(
            name=self.spec.title,
            auth_type="oauth" if self.key_source == "oauth" else ("api_key" if self.needs_key else "none"),
            auth_label=self.spec.api_key_env,
            auth_configured=bool(self.key) if self.needs_key else True,
            auth_source=self.key_source,
            recommended=self.spec.builtin and self.needs_key,
            sort_order=self.spec.sort_order,
            description=self.spec.description,
            dialect=self.spec.dialect,
            base_url=self.spec.base_url,
        )

    def default_model(self) -> str:
        """Configured default, else the first configured model, else the first one the endpoint
        serves (asked only for keyless loopback servers, with a short timeout), else ""."""
        if self.spec.default_model:
            return self.spec.default_model
        if self.spec.models:
            return self.spec.models[0]
        if self._served is None and self.spec.is_loopback and not self.needs_key:
            self._served = probe_model_ids(self.spec.base_url + self.models_path) or None
        return self._served[0] if self._served else ""

    def knows(self, model: str) -> bool:
        """Whether the table or config describes ``model`` (else its limits are guesses)."""
        return table_row(model) is not None or self._override_for(model) is not None

    def sent_output_limit(self, profile: ModelProfile) -> int | None:
        """The output limit requests for this model carry: a guessed one (unknown model) is not
        sent, since it can exceed a local server's window; dialects that require one override."""
        return profile.max_output_tokens if self.knows(profile.id) else None

    def _override_for(self, model: str) -> tuple[str, Mapping[str, Any]] | None:
        for key in (f"{self.spec.name}/{model}", model):
            if key in self._overrides:
                return key, self._overrides[key]
        return None

    def model_profile(self, model: str) -> ModelProfile:
        profile = builtin_profile(self.spec.name, model) or ModelProfile(id=model, provider=self.spec.name)
        found = self._override_for(model)
        return apply_overrides(profile, found[1], found[0]) if found else profile

    async def list_models(self) -> list[ModelProfile]:
        """Configured ``models``, else the endpoint's ``/models`` listing."""
        if self.spec.models:
            ids = list(self.spec.models)
        else:
            self._require_key()
            await self.refresh_sign_in()
            ids = self.parse_model_ids(await self.transport.get_json(self.models_path))
            self._served = ids
        return [self.model_profile(model) for model in ids]

    async def _no_model_chosen(self) -> InferenceError:
        """The error for a request without a model. An endpoint with no ``models`` list is asked
        for its listing first, so a key it refuses (a 401) or a wrong ``base_url`` is reported as
        itself rather than hidden behind "no model chosen"; what it serves goes into the hint."""
        served = ""
        if not self.spec.models:
            ids = [profile.id for profile in await self.list_models()]  # raises the endpoint's own error
            served = f"; it serves {', '.join(ids[:5])}{', ...' if len(ids) > 5 else ''}" if ids else ""
        return self.errors.make(
            "bad_request",
            "no model chosen",
            f"pass --model or set default_model in [providers.{self.spec.name}]{served} "
            f"(see `roder models --provider {self.spec.name}`)",
        )

    def _require_key(self) -> None:
        if self.needs_key and not self.key:
            raise self.errors.make(
                "auth",
                f"{self.spec.api_key_env} is not set",
                f"export it, or store a key with `roder providers login {self.spec.name}`",
                retryable=False,
            )

    async def aclose(self) -> None:
        await self.transport.aclose()

    # ------------------------------------------------------------------ the call

    async def stream_turn(self, ctx: InferenceTurnContext, request: AgentInferenceRequest) -> AsyncIterator[InferenceEvent]:
        """Send the request, stream canonical events, retry transient failures (see module doc)."""
        self._require_key()
        await self.refresh_sign_in()
        if not request.model:
            raise await self._no_model_chosen()
        profile = self.model_profile(request.model)
        body = self.encode(request, profile)
        headers = self.request_headers(body, profile)
        payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        guard = ReplayGuard()
        retries = 0
        while True:
            try:
                async with self.transport.stream(self.path, payload, headers) as response:
                    decoder = self.decoder()
                    batches = self.transport.event_batches(response, ctx.max_response_bytes, ctx.max_response_seconds)
                    async for batch in batches:
                        admitted, failure = _decode(batch, decoder, guard)
                        for out in merge_deltas(admitted):
                            yield out
                        if failure is not None:
                            raise failure
                        if decoder.done:
                            await self.transport.finish(batches)
                            break
                    if not decoder.done:
                        for event in decoder.finish():
                            for out in guard.admit(event):
                                yield out
                return
            except InferenceError as exc:
                wait = self.retry.delay(retries, exc)
                if wait is None:
                    raise
                retries += 1
                log.info("%s; retry %d of %d in %.2f s", exc, retries, self.retry.max_retries, wait)
                yield ProviderMetadataEvent(
                    data={
                        "retry": {
                            "attempt": retries,
                            "max_attempts": self.retry.max_retries,
                            "wait": round(wait, 3),
                            "kind": exc.kind,
                            "reason": str(exc),
                            "at": time.time(),
                        }
                    }
                )
                guard.next_attempt()
                await asyncio.sleep(wait)


def _decode(
    batch: list[SSEEvent], decoder: WireDecoder, guard: ReplayGuard
) -> tuple[list[InferenceEvent], InferenceError | None]:
    """The events the guard admits for one read's SSE events, up to the answer's end, and the
    error a decoder raised on the way: the events admitted before it are still the consumer's
    (the guard counts them as shown, so a retry must not be the first to see them)."""
    admitted: list[InferenceEvent] = []
    try:
        for sse in batch:
            for event in decoder.feed(sse):
                admitted += guard.admit(event)
            if decoder.done:
                break
    except InferenceError as exc:
        return admitted, exc
    return admitted, None


def merge_deltas(events: list[InferenceEvent]) -> list[InferenceEvent]:
    """``events`` with each run of adjacent text deltas of one kind joined into one delta.

    One network read brings a few events at a time (``ReadPacer``); every event the engine
    yields costs the runtime a turn of its loop, a live notification and a message to each
    client, so the text of one read travels as one delta. Only deltas that differ in nothing
    but their text are joined (reasoning with provider data, a signature, stays apart), in
    order, and nothing else moves: a delta never crosses a tool call, a usage or logprobs event.
    """
    if len(events) < 2:
        return events
    merged: list[InferenceEvent] = []
    run: list[str] = []  # the texts of the run of deltas merged[-1] stands for

    def close_run() -> None:
        if len(run) > 1:
            last = merged[-1]
            merged[-1] = last.model_copy(update={"text": "".join(run)})
        run.clear()

    for event in events:
        if run and _joinable(merged[-1], event):
            run.append(event.text)  # type: ignore[union-attr]
            continue
        close_run()
        merged.append(event)
        if _joinable(event, event):
            run.append(event.text)  # type: ignore[union-attr]
    close_run()
    return merged


def _joinable(first: InferenceEvent, then: InferenceEvent) -> bool:
    """Whether ``then`` may be joined to ``first`` as one delta: both message text, or both
    reasoning of the same kind without provider data."""
    if isinstance(first, MessageDelta):
        return isinstance(then, MessageDelta)
    return (
        isinstance(first, ReasoningDelta)
        and isinstance(then, ReasoningDelta)
        and first.provider_data is None
        and then.provider_data is None
        and first.summary == then.summary
    )
