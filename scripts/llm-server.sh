#!/usr/bin/env bash
# Starts, stops or reports the local llama.cpp server that qrmem uses by default.
#
# Usage: scripts/llm-server.sh start|stop|status|restart [--model 0.5b|1.5b|135m] [--port 8080]
#                              [--np 1] [--ctx 8192] [--threads 2]
# start waits until GET /health answers 200 (up to 180 s) and serves the model under the name
# qrmem's configuration expects (qwen2.5-coder-0.5b-instruct, ...). Install first with
# scripts/setup-local-llm.sh. The pid and log live in ${QRMEM_CACHE:-~/.cache/qrmem}/run/.
set -euo pipefail

cmd="${1:-}"; [ $# -gt 0 ] && shift
MODEL=0.5b PORT=8080 NP=1 CTX=8192 THREADS="$(nproc)"
while [ $# -gt 0 ]; do
  case "$1" in
    --model) MODEL="$2"; shift 2 ;;
    --port) PORT="$2"; shift 2 ;;
    --np) NP="$2"; shift 2 ;;
    --ctx) CTX="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    *) echo "llm-server: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

CACHE="${QRMEM_CACHE:-$HOME/.cache/qrmem}"
RUN="$CACHE/run"; mkdir -p "$RUN"
PIDFILE="$RUN/llama-server-$PORT.pid"
LOG="$RUN/llama-server-$PORT.log"
SERVER="$CACHE/bin/llama-server"

case "$MODEL" in
  0.5b) GGUF=qwen2.5-coder-0.5b-instruct-q4_k_m.gguf; ALIAS=qwen2.5-coder-0.5b-instruct ;;
  1.5b) GGUF=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf; ALIAS=qwen2.5-coder-1.5b-instruct ;;
  135m) GGUF=smollm2-135m-instruct-q4_1.gguf; ALIAS=smollm2-135m-instruct ;;
  *) echo "llm-server: unknown model '$MODEL' (0.5b, 1.5b or 135m)" >&2; exit 2 ;;
esac

healthy() { curl -fs -o /dev/null --max-time 2 "http://127.0.0.1:$PORT/health"; }
running_pid() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null && cat "$PIDFILE"; }

start() {
  if pid=$(running_pid); then
    echo "llm-server: already running (pid $pid) on http://127.0.0.1:$PORT/v1"
    return 0
  fi
  if healthy; then
    echo "llm-server: another server already answers on port $PORT; stop it or use --port" >&2
    exit 1
  fi
  [ -x "$SERVER" ] || { echo "llm-server: $SERVER is missing; run scripts/setup-local-llm.sh --model $MODEL" >&2; exit 1; }
  [ -s "$CACHE/models/$GGUF" ] || { echo "llm-server: model $GGUF is missing; run scripts/setup-local-llm.sh --model $MODEL" >&2; exit 1; }
  setsid nohup "$SERVER" -m "$CACHE/models/$GGUF" -c $((CTX * NP)) -np "$NP" -t "$THREADS" \
    --host 127.0.0.1 --port "$PORT" --alias "$ALIAS" --no-webui >"$LOG" 2>&1 < /dev/null &
  echo $! > "$PIDFILE"
  for _ in $(seq 1 720); do
    if healthy; then
      echo "llm-server: $ALIAS ready on http://127.0.0.1:$PORT/v1 (pid $(cat "$PIDFILE"), log $LOG)"
      return 0
    fi
    if ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
      echo "llm-server: the server exited during start; last lines of $LOG:" >&2
      tail -n 20 "$LOG" >&2
      rm -f "$PIDFILE"
      exit 1
    fi
    sleep 0.25
  done
  echo "llm-server: no healthy answer within 180 s; see $LOG" >&2
  stop
  exit 1
}

stop() {
  if pid=$(running_pid); then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
    echo "llm-server: stopped (pid $pid)"
  else
    echo "llm-server: not running on port $PORT"
  fi
  rm -f "$PIDFILE"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  restart) stop; start ;;
  status)
    if pid=$(running_pid) && healthy; then echo "llm-server: running (pid $pid) on http://127.0.0.1:$PORT/v1"
    else echo "llm-server: not running on port $PORT"; exit 1; fi ;;
  *) sed -n '2,8p' "$0"; exit 2 ;;
esac
