// The live page: microphone -> AudioWorklet (16 kHz Float32) -> WebSocket /ws -> partial/final words on screen.
// ?autostart=1&seconds=N starts at once and ends the stream after N s of audio (headless tests, demos).
const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const state = { ws: null, ctx: null, stream: null, sentSamples: 0, finals: [], delays: [], ended: false };

function wsUrl() {
  return (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws";
}

async function describe() {
  const v = await (await fetch("/version")).json();
  $("version").textContent = `${v.registered_model} v${v.version} (@${v.alias}) · ${v.base_model || ""} · ` +
    `${v.kind} · ${v.precision || "fp32"}`;
  $("chunk").innerHTML = v.chunk_ms_choices.map((c) =>
    `<option ${c === v.chunk_ms ? "selected" : ""}>${c}</option>`).join("");
}

function render() {
  $("final").textContent = state.finals.join(" ");
  const sorted = [...state.delays].sort((a, b) => a - b);
  if (sorted.length) $("latency-median").textContent = Math.round(sorted[Math.floor(sorted.length / 2)]);
}

function onEvent(ev) {
  if (ev.type === "ready") { $("status").textContent = `streaming to v${ev.model.version}`; return; }
  if (ev.type === "final") {
    state.finals.splice(ev.index, ev.words.length, ...ev.words);
    $("partial").textContent = "";
  } else if (ev.type === "partial") {
    $("partial").textContent = ev.words.join(" ");
  } else if (ev.type === "warning" || ev.type === "error") {
    $("status").textContent = `${ev.type}: ${ev.code}: ${ev.message}`;
  } else if (ev.type === "summary") {
    $("summary").textContent = `done: ${ev.words} words, ${(ev.audio_ms / 1000).toFixed(1)} s of audio, ` +
      `RTF ${ev.rtf}, model v${ev.version.version}`;
    $("summary").dataset.text = ev.text;
    $("status").textContent = "done";
  }
  if (ev.type === "final" || ev.type === "partial") {
    const delay = ev.emitted_at_ms - ev.end_ms;
    state.delays.push(delay);
    $("latency").textContent = Math.round(delay);
  }
  render();
}

async function start() {
  $("start").disabled = true; $("stop").disabled = false;
  state.finals = []; state.delays = []; state.sentSamples = 0; state.ended = false;
  $("final").textContent = ""; $("partial").textContent = ""; $("summary").textContent = "";
  // The worklet is loaded before the microphone opens and the graph is connected at once, and frames captured
  // while the socket opens wait in `early` and go first: no audio is lost to a slow load (it once cut the first
  // words), and the permission prompt comes before the socket, whose server wants audio within seconds.
  state.ctx = new AudioContext();
  await state.ctx.audioWorklet.addModule("/static/capture-worklet.js");
  const node = new AudioWorkletNode(state.ctx, "capture-processor");
  state.stream = await navigator.mediaDevices.getUserMedia({
    audio: { channelCount: 1, echoCancellation: false, noiseSuppression: false, autoGainControl: false } });
  const early = [];
  node.port.onmessage = (m) => early.push(m.data);
  state.ctx.createMediaStreamSource(state.stream).connect(node);
  // a bearer token, where the server asks for one, comes from the fragment (page/#token=...): the fragment is never
  // sent to a server, and browsers cannot set headers on a WebSocket, so it travels as a subprotocol offer
  const token = new URLSearchParams(location.hash.slice(1)).get("token");
  const ws = token ? new WebSocket(wsUrl(), ["whisperline.bearer." + token]) : new WebSocket(wsUrl());
  ws.binaryType = "arraybuffer";
  state.ws = ws;
  ws.onmessage = (m) => onEvent(JSON.parse(m.data));
  ws.onclose = (e) => { if (!state.ended) $("status").textContent = `closed (${e.code}) ${e.reason || ""}`; cleanup(); };
  await new Promise((ok) => { ws.onopen = ok; });
  ws.send(JSON.stringify({ type: "config", format: "f32", sample_rate: 16000, chunk_ms: Number($("chunk").value) }));
  const limit = params.get("seconds") ? Number(params.get("seconds")) * 16000 : Infinity;
  const send = (frame) => {
    if (state.ended || ws.readyState !== WebSocket.OPEN) return;
    if (state.sentSamples + frame.length > limit) frame = frame.subarray(0, Math.max(0, limit - state.sentSamples));
    if (frame.length) ws.send(frame.buffer.slice(frame.byteOffset, frame.byteOffset + frame.byteLength));
    state.sentSamples += frame.length;
    $("sent").textContent = (state.sentSamples / 16000).toFixed(1);
    if (state.sentSamples >= limit) stop();
  };
  early.splice(0).forEach(send);
  node.port.onmessage = (m) => send(m.data);
}

function stop() {
  if (state.ended) return;
  state.ended = true;
  $("status").textContent = "finishing…";
  if (state.ws && state.ws.readyState === WebSocket.OPEN) state.ws.send(JSON.stringify({ type: "end" }));
  $("stop").disabled = true;
  if (state.stream) state.stream.getTracks().forEach((t) => t.stop());
}

function cleanup() {
  if (state.ctx) { state.ctx.close(); state.ctx = null; }
  $("start").disabled = false; $("stop").disabled = true;
}

$("start").onclick = () => start().catch((e) => { $("status").textContent = `error: ${e}`; cleanup(); });
$("stop").onclick = stop;
describe().then(() => { if (params.get("autostart")) $("start").click(); })
  .catch((e) => { $("version").textContent = `no model: ${e}`; });
