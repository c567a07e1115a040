#!/usr/bin/env bash
# A bash process extension whose tools misbehave as an author's might: `flood` answers with
# three million characters of text (then `END`), `vanish` exits in the middle of its call.
manifest='{"manifest":{"id":"flood-tool","name":"Flood","version":"0.1.0","api_version":"0.1.0","provides":[{"ToolProvider":"flood-tool"}],"required_capabilities":[]},"services":{"tools":[{"name":"flood","description":"Print a lot.","inputSchema":{"type":"object","properties":{}},"readOnly":true},{"name":"vanish","description":"Exit mid-call.","inputSchema":{"type":"object","properties":{}},"readOnly":true}]}}'
while IFS= read -r line; do
  [[ $line =~ \"id\":([0-9]+) ]] && id=${BASH_REMATCH[1]} || id=""
  [[ $line =~ \"method\":\"([^\"]+)\" ]] && method=${BASH_REMATCH[1]} || method=""
  [[ $line =~ \"tool\":\"([^\"]+)\" ]] && tool=${BASH_REMATCH[1]} || tool=""
  case $method:$tool in
    initialize:*) printf '{"jsonrpc":"2.0","id":%s,"result":%s}\n' "$id" "$manifest" ;;
    tool/execute:flood)
      printf '{"jsonrpc":"2.0","id":%s,"result":{"text":"' "$id"
      head -c 3000000 /dev/zero | tr '\0' x
      printf 'END"}}\n' ;;
    tool/execute:vanish) echo "flood: leaving in the middle of a call" >&2; exit 5 ;;
    *) [[ -n $id && -n $method ]] && printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"unknown method"}}\n' "$id" ;;
  esac
done
