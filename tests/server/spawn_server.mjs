// Starts smol-server for a test and waits until it listens.
//
//   const server = await startServer('/path/to/smol-server', ['-m', 'model.gguf']);
//   fetch(`${server.url}/health`); ...; const code = await server.stop();
//
// The server is started with `--port 0` (unless args name a port) and must print
// a line containing "listening on http://HOST:PORT" on stderr. Its stderr and
// stdout are copied to our stderr with a "[server] " prefix (stdout is kept off
// our stdout, where node:test writes its report).
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

const START_TIMEOUT_MS = 120_000;
const STOP_TIMEOUT_MS = 30_000;

// Servers not stopped yet; killed if this process exits early.
const running = new Set();
process.on('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

export async function startServer(serverBinary, args = []) {
  const fullArgs = args.includes('--port') ? [...args] : [...args, '--port', '0'];
  const child = spawn(serverBinary, fullArgs, { stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);

  let exitCode; // undefined while running; the code, or the signal's name
  const exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      exitCode = code ?? signal;
      running.delete(child);
      resolve(exitCode);
    });
  });

  const stderrLines = [];
  createInterface({ input: child.stdout }).on('line', (line) => process.stderr.write(`[server] ${line}\n`));

  const url = await new Promise((resolve, reject) => {
    let settled = false;
    const fail = (why) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new Error(`${why}\n$ ${serverBinary} ${fullArgs.join(' ')}\n--- stderr ---\n${stderrLines.join('\n')}`));
    };
    const timer = setTimeout(() => fail(`smol-server did not listen within ${START_TIMEOUT_MS / 1000} s`), START_TIMEOUT_MS);
    child.on('error', (e) => fail(`could not start smol-server: ${e.message}`));
    exited.then((code) => fail(`smol-server exited (${code}) before it listened`));
    createInterface({ input: child.stderr }).on('line', (line) => {
      process.stderr.write(`[server] ${line}\n`);
      if (settled) return;
      stderrLines.push(line);
      const m = line.match(/listening on (http:\/\/[^\s]+)/);
      if (m) {
        settled = true;
        clearTimeout(timer);
        // A wildcard address is not something to connect to; use loopback.
        resolve(m[1].replace(/\/+$/, '').replace('://0.0.0.0:', '://127.0.0.1:').replace('://[::]:', '://[::1]:'));
      }
    });
  });

  return {
    url,
    process: child,
    // SIGTERM, then wait for the exit; resolves to the exit code (or the signal's
    // name if it died of a signal). SIGKILL after STOP_TIMEOUT_MS, resolving 'timeout'.
    async stop() {
      if (exitCode !== undefined) return exitCode;
      child.kill('SIGTERM');
      let timer;
      const timeout = new Promise((resolve) => {
        timer = setTimeout(() => {
          child.kill('SIGKILL');
          resolve('timeout');
        }, STOP_TIMEOUT_MS);
      });
      const result = await Promise.race([exited, timeout]);
      clearTimeout(timer);
      return result;
    },
  };
}
