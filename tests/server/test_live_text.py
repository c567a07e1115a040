"""What a late client is given of items still streaming: exactly the published text, the tail of
a running tool's output, nothing once items or the turn complete."""

from __future__ import annotations

from roder_core.ir import AgentMessageItem, ToolResultItem, Turn
from roder_core.server.live_text import MAX_TOOL_OUTPUT, LiveText
from roder_core.threads.events import AgentMessageDelta, ItemCompleted, ToolOutputDelta, TurnCompleted


def test_open_items_and_tool_output_are_kept_until_they_complete() -> None:
    live = LiveText()
    for piece in ("Hel", "lo ", "there"):
        live.observe(AgentMessageDelta(thread_id="t", turn_id="u", item_id="a", delta=piece))
    live.observe(AgentMessageDelta(thread_id="t", turn_id="u", item_id="r", delta="hmm", kind="reasoning"))
    for n in range(3 * MAX_TOOL_OUTPUT // 1000):
        live.observe(ToolOutputDelta(thread_id="t", turn_id="u", call_id="c", delta=f"{n:04d}" + "." * 996))
    live.observe(AgentMessageDelta(thread_id="other", turn_id="v", item_id="b", delta="elsewhere"))
    now = live.of("t")
    assert now.items == {"a": ("text", "Hello there"), "r": ("reasoning", "hmm")}
    output = now.tool_output["c"]
    assert len(output) == MAX_TOOL_OUTPUT and output.endswith(f"{3 * MAX_TOOL_OUTPUT // 1000 - 1:04d}" + "." * 996)

    live.observe(ItemCompleted(thread_id="t", turn_id="u", item=AgentMessageItem(id="a", text="Hello there")))
    live.observe(ItemCompleted(thread_id="t", turn_id="u", item=ToolResultItem(call_id="c", name="bash", text="done")))
    assert live.of("t").items == {"r": ("reasoning", "hmm")} and live.of("t").tool_output == {}
    live.observe(TurnCompleted(thread_id="t", turn=Turn(id="u")))
    assert live.of("t").items == {} and live.of("other").items == {"b": ("text", "elsewhere")}
