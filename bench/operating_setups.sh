#!/bin/sh
# docs/operating.md's install and test range, run as written by a person: in a scratch
# folder that stands for /opt, a venv named geminibot (so the service is started from a
# folder holding a "geminibot" folder, as from /opt), the package installed into it, the
# commented defaults written, then the document's test-range settings (read from the
# document) started over three small capsules served by capsule-server, a search asked
# through the capsule, and SIGTERM. Uses the document's ports (1966, 1967, 8966, 9466):
# run it where they are free. Network traffic: pip's (the install), then loopback only.
#
#   sh bench/operating_setups.sh            # prints each step; exit 0 when all went well
set -eu
REPO=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3.11}
OPT=$(mktemp -d)
trap 'kill $SERVER $SERVICE 2>/dev/null || true; rm -rf "$OPT"' EXIT
SERVER= SERVICE=
cd "$OPT"

echo "== install (docs/operating.md, Install) in $OPT"
"$PYTHON" -m venv geminibot
geminibot/bin/pip install --quiet "$REPO"
geminibot/bin/geminibot serve --print-config > engine.toml
grep -q '^concurrency = 128$' engine.toml

echo "== the test range's settings, as the document writes them"
sed -n '/<!-- setup: test-range -->/,/^```$/p' "$REPO/docs/operating.md" \
    | sed '1,2d;$d' > test-range.toml
cat test-range.toml

echo "== three capsules on 127.0.0.1:1966"
for n in 0 1 2; do
    mkdir -p "my-capsules/host0$n.test"
    next=$(( (n + 1) % 3 ))
    printf '# host %s\n\nkettle number %s\n=> gemini://host0%s.test/ next\n' \
        "$n" "$n" "$next" > "my-capsules/host0$n.test/index.gmi"
done
geminibot/bin/capsule-server serve my-capsules/ --port 1966 --log access.jsonl \
    2> capsule-server.log &
SERVER=$!

echo "== geminibot serve --config test-range.toml (from the folder holding geminibot/)"
geminibot/bin/geminibot serve --config test-range.toml > service.log 2>&1 &
SERVICE=$!
tries=0
until printf 'gemini://localhost/search?kettle\r\n' \
        | openssl s_client -quiet -connect 127.0.0.1:1967 -servername localhost \
            2>/dev/null | grep -q 'host02.test'; do
    tries=$((tries + 1))
    if [ "$tries" -ge 120 ] || ! kill -0 "$SERVICE" 2>/dev/null; then
        echo "no search result after $tries tries"; cat service.log; exit 1
    fi
    sleep 1
done
echo "found host02.test's page through the search capsule after $tries s"
if grep -q '"exited with' service.log; then
    echo "a component died:"; grep '"exited with' service.log; exit 1
fi

echo "== SIGTERM"
kill -TERM "$SERVICE"
wait "$SERVICE"
SERVICE=
geminibot/bin/geminibot index status --db var/test-range/crawl.db --verify
echo "all set-ups ran as written"
