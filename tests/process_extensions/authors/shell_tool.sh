#!/usr/bin/env bash
# A process extension in plain bash, written from docs/extension-protocol.md alone: one tool,
# `line_count`, counting the lines of its `text` argument. JSON is read with bash's own regular
# expressions (enough for the messages Roder sends this tool); answers are printed one a line.
manifest='{"manifest":{"id":"shell-tool","name":"Shell tool","version":"0.1.0","api_version":"0.1.0","provides":[{"ToolProvider":"shell-tool"}],"required_capabilities":[]},"services":{"tools":[{"name":"line_count","description":"Count the lines of a text.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]},"readOnly":true}]}}'
while IFS= read -r line; do
  [[ $line =~ \"id\":([0-9]+) ]] && id=${BASH_REMATCH[1]} || id=""
  [[ $line =~ \"method\":\"([^\"]+)\" ]] && method=${BASH_REMATCH[1]} || method=""
  case $method in
    initialize) printf '{"jsonrpc":"2.0","id":%s,"result":%s}\n' "$id" "$manifest" ;;
    tool/execute)
      [[ $line =~ \"text\":\"(([^\"\\]|\\.)*)\" ]] && text=${BASH_REMATCH[1]} || text=""
      lines=$(( $(grep -o '\\n' <<<"$text" | wc -l) + 1 ))
      printf '{"jsonrpc":"2.0","id":%s,"result":{"text":"%s lines","isError":false}}\n' "$id" "$lines" ;;
    *) [[ -n $id && -n $method ]] && printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"unknown method"}}\n' "$id" ;;
  esac
done
