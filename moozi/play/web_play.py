"""`moozi play RUN --web`: play a trained agent at a two-player board game in the browser.

A small server from the standard library (`http.server`): one page, drawn and driven by inline
JavaScript (nothing fetched from the internet), and a JSON API the page calls. Every game has its own
id, so two browser tabs play two independent games. The server binds to 127.0.0.1 unless told
otherwise. An illegal click gets a message on the page, never an error page.

API (POST, JSON in and out): /api/new {seat} -> a game; /api/move {id, row, col} or {id, action};
/api/undo {id} (back to the person's previous turn). Each answer is the game's state: the board's
rows, whose turn, the clickable cells, the moves that fill no cell (go's pass), the agent's last root
value and top moves by visit share, and a message.
"""

from __future__ import annotations

import dataclasses
import http.server
import json
import threading
import uuid

import pyspiel

from moozi.play.boards import board_grid, cell_actions
from moozi.envs.registry import make_played_env
from moozi.errors import MooziError


@dataclasses.dataclass
class _Game:
    human_seat: int
    actions: list[int]  # every move so far, from the initial state
    agent_info: dict | None = None  # the agent's last search: value and top moves
    last_action: int | None = None


class WebPlay:
    """The games and the agent behind the page; thread-safe (one lock: the agent searches one move at a time)."""

    def __init__(self, agent, max_games: int = 256):
        if not agent.spec.is_two_player:
            raise MooziError(f"moozi play --web plays two-player board games; {agent.config.game} has one player "
                             "(`moozi report RUN` shows it playing an episode)")
        canonical, env = make_played_env(agent.config.game)
        game = getattr(env, "game", None)
        if not isinstance(game, pyspiel.Game):
            raise MooziError(f"{canonical}: playing in the browser needs an OpenSpiel game")
        self.agent, self.game_name, self.game = agent, canonical, game
        self._bots = {seat: agent.as_openspiel_bot(seat) for seat in (0, 1)}
        self._games: dict[str, _Game] = {}
        self._max_games = max_games
        self._lock = threading.Lock()

    def _state(self, game: _Game):
        state = self.game.new_initial_state()
        for action in game.actions:
            state.apply_action(action)
        return state

    def new(self, seat) -> dict:
        if seat not in (0, 1):
            return {"error": f"seat must be 0 (move first) or 1 (move second), got {seat!r}"}
        with self._lock:
            if len(self._games) >= self._max_games:  # the oldest games make room
                for key in list(self._games)[: len(self._games) // 2]:
                    del self._games[key]
            game_id = uuid.uuid4().hex[:12]
            game = self._games[game_id] = _Game(seat, [])
            self._agent_moves(game)
            return self._view(game_id, game, "Your move." if not self._state(game).is_terminal() else "")

    def move(self, game_id, row=None, col=None, action=None) -> dict:
        with self._lock:
            game = self._games.get(game_id)
            if game is None:
                return {"error": "no such game (the server may have restarted): start a new game"}
            state = self._state(game)
            if state.is_terminal():
                return self._view(game_id, game, "The game is over: start a new game.")
            if state.current_player() != game.human_seat:
                return self._view(game_id, game, "Not your turn.")
            chosen = self._click_to_action(state, row, col, action)
            if isinstance(chosen, str):
                return self._view(game_id, game, chosen)
            game.actions.append(chosen)
            game.last_action = chosen
            self._agent_moves(game)
            return self._view(game_id, game, "")

    def undo(self, game_id) -> dict:
        with self._lock:
            game = self._games.get(game_id)
            if game is None:
                return {"error": "no such game: start a new game"}
            # Back to the person's previous turn: drop the agent's replies and the person's last move.
            while game.actions:
                game.actions.pop()
                state = self._state(game)
                if state.current_player() == game.human_seat:
                    break
            game.last_action, game.agent_info = (game.actions[-1] if game.actions else None), None
            self._agent_moves(game)  # if the undo went back past the agent's first move, it moves again
            return self._view(game_id, game, "Took back your last move.")

    def _click_to_action(self, state, row, col, action):
        legal = state.legal_actions()
        if action is not None:
            return int(action) if isinstance(action, int) and action in legal else "That move is not legal here."
        if not isinstance(row, int) or not isinstance(col, int):
            return "Click a point of the board."
        cells, columns, _ = cell_actions(state)
        if (row, col) in cells:
            return cells[(row, col)]
        if col in columns:
            return columns[col]
        return "Illegal move: that point is taken or not playable. Choose another."

    def _agent_moves(self, game: _Game) -> None:
        state = self._state(game)
        while not state.is_terminal() and state.current_player() != game.human_seat:
            if state.is_chance_node():
                outcomes, probs = zip(*state.chance_outcomes())
                action = outcomes[max(range(len(probs)), key=probs.__getitem__)]
            else:
                player = state.current_player()
                action = self._bots[player].step(state)
                search = self.agent.last_search
                if search is not None:
                    share = search.root.visit_share[1:]
                    order = sorted(state.legal_actions(), key=lambda a: -float(share[a]))[:3]
                    game.agent_info = {"value": float(search.root_value),
                                       "top": [{"move": state.action_to_string(player, a), "share": float(share[a])}
                                               for a in order]}
            state.apply_action(action)
            game.actions.append(action)
            game.last_action = action

    def _view(self, game_id: str, game: _Game, message: str) -> dict:
        state = self._state(game)
        rows = board_grid(str(state))
        view = {"id": game_id, "game": self.game_name, "human_seat": game.human_seat, "rows": rows,
                "text": None if rows else str(state), "moves": len(game.actions), "message": message,
                "agent": game.agent_info, "terminal": state.is_terminal(), "cells": [], "columns": [], "others": []}
        if state.is_terminal():
            outcome = state.returns()[game.human_seat]
            view["result"] = "You won!" if outcome > 0 else "A draw." if outcome == 0 else "The agent won."
        elif state.current_player() == game.human_seat:
            cells, columns, others = cell_actions(state)
            view.update(cells=[list(c) for c in cells], columns=sorted(columns),
                        others=[{"action": a, "name": n} for a, n in others.items()])
        view["to_play"] = "you" if not state.is_terminal() and state.current_player() == game.human_seat else "agent"
        return view


def make_server(play: WebPlay, host: str = "127.0.0.1", port: int = 8765) -> http.server.ThreadingHTTPServer:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            if self.path in ("/", "/index.html"):
                self._send(200, "text/html; charset=utf-8", _PAGE.replace("__GAME__", play.game_name).encode())
            else:
                self._send(404, "text/plain; charset=utf-8", b"not found: the game is at /")

        def do_POST(self):  # noqa: N802
            try:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if not isinstance(body, dict):
                    raise ValueError("not an object")
            except ValueError:
                return self._json({"error": "the request was not a JSON object"})
            if self.path == "/api/new":
                return self._json(play.new(body.get("seat", 0)))
            if self.path == "/api/move":
                return self._json(play.move(body.get("id"), body.get("row"), body.get("col"), body.get("action")))
            if self.path == "/api/undo":
                return self._json(play.undo(body.get("id")))
            return self._json({"error": f"unknown request {self.path}"})

        def _json(self, data):
            self._send(200, "application/json", json.dumps(data).encode())

        def _send(self, status, kind, data: bytes):
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):  # quiet: the terminal shows the address, not every request
            pass

    return http.server.ThreadingHTTPServer((host, port), Handler)


def serve(agent, host: str = "127.0.0.1", port: int = 8765) -> None:
    play = WebPlay(agent)
    server = make_server(play, host, port)
    where = "this machine only" if host in ("127.0.0.1", "localhost", "::1") else "every machine that can reach it"
    print(f"moozi play: {play.game_name} at http://{host}:{server.server_address[1]}/ "
          f"(bound to {host}: {where}; Ctrl-C stops it)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>moozi: play __GAME__</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
#board { margin: 1em 0; } #board rect.cell { cursor: pointer; }
#message { min-height: 1.4em; color: #b00; } #result { font-weight: bold; font-size: 1.2em; }
#agent { color: #444; } button { margin-right: 0.5em; }
</style></head>
<body>
<h1>Play __GAME__ against moozi</h1>
<p>
  <label><input type="radio" name="seat" value="0" checked> move first</label>
  <label><input type="radio" name="seat" value="1"> move second</label>
  <button id="new">New game</button> <button id="undo">Undo</button> <span id="others"></span>
</p>
<div id="status"></div>
<div id="board"></div>
<div id="message" role="status"></div>
<div id="result"></div>
<div id="agent"></div>
<script>
let game = null;
const SIZE = 44;
async function api(path, body) {
  const response = await fetch(path, {method: "POST", headers: {"Content-Type": "application/json"},
                                      body: JSON.stringify(body)});
  return response.json();
}
function seat() { return Number(document.querySelector('input[name=seat]:checked').value); }
function show(view) {
  if (view.error) { document.getElementById("message").textContent = view.error; return; }
  game = view;
  document.getElementById("message").textContent = view.message || "";
  document.getElementById("result").textContent = view.result || "";
  document.getElementById("status").textContent = view.terminal ? "Game over." :
      (view.to_play === "you" ? "Your move (you are " + (view.human_seat === 0 ? "the first player, dark" : "the second player, light") + ")." : "The agent is thinking...");
  const info = view.agent;
  document.getElementById("agent").textContent = info ?
      "Agent's value estimate (for itself): " + info.value.toFixed(2) + "; its top moves: " +
      info.top.map(t => t.move + " " + Math.round(100 * t.share) + "%").join(", ") : "";
  drawBoard(view);
  const others = document.getElementById("others");
  others.innerHTML = "";
  for (const o of view.others) {
    const b = document.createElement("button");
    b.textContent = o.name; b.onclick = () => move({action: o.action}); others.appendChild(b);
  }
}
function drawBoard(view) {
  const holder = document.getElementById("board");
  if (!view.rows) { holder.innerHTML = "<pre></pre>"; holder.firstChild.textContent = view.text; return; }
  const h = view.rows.length, w = view.rows[0].length, ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("width", w * SIZE); svg.setAttribute("height", h * SIZE); svg.setAttribute("id", "boardsvg");
  const playable = new Set(view.cells.map(c => c[0] + "," + c[1]));
  for (let r = 0; r < h; r++) for (let c = 0; c < w; c++) {
    const cell = document.createElementNS(ns, "rect");
    cell.setAttribute("x", c * SIZE); cell.setAttribute("y", r * SIZE);
    cell.setAttribute("width", SIZE); cell.setAttribute("height", SIZE);
    cell.setAttribute("fill", playable.has(r + "," + c) ? "#e6c27a" : "#dcb35c");
    cell.setAttribute("stroke", "#7a5a1e"); cell.setAttribute("class", "cell");
    cell.setAttribute("data-row", r); cell.setAttribute("data-col", c);
    cell.addEventListener("click", () => move({row: r, col: c}));
    svg.appendChild(cell);
    const ch = view.rows[r][c];
    const stone = "xXbB".includes(ch) ? 0 : "oOwW".includes(ch) ? 1 : null;
    if (stone !== null) {
      const s = document.createElementNS(ns, "circle");
      s.setAttribute("cx", c * SIZE + SIZE / 2); s.setAttribute("cy", r * SIZE + SIZE / 2);
      s.setAttribute("r", SIZE * 0.42); s.setAttribute("fill", stone === 0 ? "#111" : "#f4f4f4");
      s.setAttribute("stroke", "#333"); s.setAttribute("class", "stone player" + stone);
      s.setAttribute("data-row", r); s.setAttribute("data-col", c);
      s.style.pointerEvents = "none";
      svg.appendChild(s);
    }
  }
  holder.innerHTML = ""; holder.appendChild(svg);
}
async function move(where) {
  if (!game) return;
  document.getElementById("status").textContent = "The agent is thinking...";
  show(await api("/api/move", Object.assign({id: game.id}, where)));
}
document.getElementById("new").onclick = async () => show(await api("/api/new", {seat: seat()}));
document.getElementById("undo").onclick = async () => { if (game) show(await api("/api/undo", {id: game.id})); };
api("/api/new", {seat: seat()}).then(show);
</script>
</body></html>
"""
