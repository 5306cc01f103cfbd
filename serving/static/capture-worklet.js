// AudioWorklet: microphone samples at the context's rate -> 16 kHz mono Float32 frames of 20 ms, posted to the page.
// Down-sampling averages the input samples each output sample spans (a box low-pass: enough for speech at
// 48 -> 16 kHz) and interpolates linearly across frame boundaries, so any input rate works.
class CaptureProcessor extends AudioWorkletProcessor {
  constructor() {
    super();
    this.step = sampleRate / 16000;  // input samples per output sample
    this.pos = 0;                    // position of the next output sample, in input samples from buffer start
    this.carry = new Float32Array(0);
    this.out = [];
  }
  process(inputs) {
    const input = inputs[0];
    if (!input || input.length === 0) return true;
    const mono = input[0];
    const buf = new Float32Array(this.carry.length + mono.length);
    buf.set(this.carry); buf.set(mono, this.carry.length);
    const half = this.step / 2;
    while (this.pos + half + 1 < buf.length) {
      const lo = Math.max(0, Math.floor(this.pos - half)), hi = Math.min(buf.length - 1, Math.ceil(this.pos + half));
      let sum = 0;
      for (let i = lo; i <= hi; i++) sum += buf[i];
      this.out.push(this.step > 1 ? sum / (hi - lo + 1) : buf[Math.floor(this.pos)]);
      this.pos += this.step;
    }
    const keep = Math.max(0, Math.floor(this.pos - half) - 1);
    this.carry = buf.slice(keep);
    this.pos -= keep;
    if (this.out.length >= 320) {
      this.port.postMessage(Float32Array.from(this.out));
      this.out = [];
    }
    return true;
  }
}
registerProcessor("capture-processor", CaptureProcessor);
