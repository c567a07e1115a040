"""The app's side of ``ask_user``: questions wait in line and are answered one dialog at a time.

Answers go back through the control plane (``session/resolve_user_input``) like any client's;
the dialog itself is ``screens.ask_user`` (imported when the first question arrives).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from textual.app import App

    from roder_core.server.app_client import AppClient
    from roder_core.threads.events import UserInputRequested
    from roder_tui.screens.ask_user import AskUserScreen


class QuestionQueue:
    """The app's pending questions: one dialog at a time, answered through the control plane
    (``session/resolve_user_input``); a dialog whose turn ended meanwhile is closed."""

    def __init__(self, app: App[Any], client: Callable[[], AppClient]) -> None:
        self._app = app
        self._client = client
        self._waiting: list[UserInputRequested] = []
        self._open: tuple[UserInputRequested, AskUserScreen] | None = None

    def add(self, event: UserInputRequested) -> None:
        self._waiting.append(event)
        self._next()

    def _next(self) -> None:
        if self._open is not None or not self._waiting:
            return
        event = self._waiting.pop(0)
        from roder_core.kernel.questions import Question
        from roder_tui.screens.ask_user import AskUserScreen

        questions = [Question.from_json(q, i) for i, q in enumerate(event.questions)]
        screen = AskUserScreen(questions)
        self._open = (event, screen)

        def answered(answers: dict[str, Any] | None) -> None:
            if self._open is not None and self._open[1] is screen:
                self._open = None
                self._app.run_worker(self._resolve(event.request_id, answers or {}), group="questions", exit_on_error=False)
            self._next()

        self._app.push_screen(screen, answered)

    async def _resolve(self, request_id: str, answers: dict[str, Any]) -> None:
        from roder_core.server.errors import RpcError
        from roder_core.server.protocol_features import SESSION_RESOLVE_USER_INPUT, ResolveUserInputParams

        try:
            params = ResolveUserInputParams(request_id=request_id, answers=answers)
            await self._client().call(SESSION_RESOLVE_USER_INPUT, params)
        except RpcError as exc:  # the turn ended (interrupted) before the answer arrived
            self._app.notify(exc.message, title="answer not delivered", severity="warning")

    def turn_ended(self, turn_id: str) -> None:
        """Questions of a finished turn can no longer be answered: drop them, close the dialog."""
        self._waiting = [e for e in self._waiting if e.turn_id != turn_id]
        if self._open is not None and self._open[0].turn_id == turn_id:
            screen = self._open[1]
            self._open = None
            if screen.is_attached:
                screen.dismiss(None)
            self._next()
