// Runs an agent CLI with no stdin (Claude Code otherwise waits for piped input, Codex
// reads it as more prompt), killed after options.timeout ms: its exit code (or the
// signal) and output.
import { spawn } from 'node:child_process';

export function runProgram(program, args, options) {
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeout);
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? signal, stdout, stderr });
    });
  });
}
