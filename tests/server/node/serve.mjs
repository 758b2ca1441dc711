// Starts `sluice serve` on a free loopback port, waits for /health, and
// stops it. The binary and the container come from SLUICE_BIN and
// SLUICE_MODEL (run_node.sh sets them).
import { spawn } from 'node:child_process';

export const BIN = process.env.SLUICE_BIN;
export const MODEL = process.env.SLUICE_MODEL;

export async function startServer(args = [], { timeoutMs = 30000 } = {}) {
  if (!BIN || !MODEL) throw new Error('SLUICE_BIN and SLUICE_MODEL must be set (see run_node.sh)');
  // --port 0: the server picks a free port and prints it on stdout.
  const proc = spawn(BIN, ['serve', MODEL, '--host', '127.0.0.1', '--port', '0', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; if (stderr.length > 1 << 20) stderr = stderr.slice(-(1 << 19)); });
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  const port = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`sluice serve did not start in ${timeoutMs} ms:\n${stderr}`)), timeoutMs);
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`sluice serve exited (code ${code}, signal ${signal}) before listening:\n${stderr}`));
    });
  });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    try {
      const r = await fetch(`${base}/health`);
      if (r.ok) break;
    } catch { /* not yet */ }
    if (i > 200) throw new Error('sluice serve: /health never answered');
    await new Promise((r) => setTimeout(r, 25));
  }
  return {
    proc,
    port,
    base,
    stderr: () => stderr,
    health: async () => (await fetch(`${base}/health`)).json(),
    // Stops with SIGTERM; resolves to the exit status. A crash shows up as
    // a signal other than the one sent, or a non-zero code.
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 10000);
      const st = await exited;
      clearTimeout(t);
      return st;
    },
    exited,
  };
}
