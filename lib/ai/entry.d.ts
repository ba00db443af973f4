// Types of kern-sandbox/ai: the AI SDK 7 sandbox session (`Experimental_SandboxSession`) on a kern
// machine, and a code interpreter tool. Hand-kept; checked against ai's own types by
// __test__/adapters/types.test.js.

/// <reference types="node" />

import type { Experimental_SandboxSession, Tool } from 'ai'
import type { Machine, Kernel, ExposedPort, ChartTypes } from '../../index.js'

export interface SandboxSessionOptions {
  /** The base directory of relative paths and of commands without a workingDirectory (absolute, or
   * relative to `/`). Default: the machine's workdir (the session's boxWorkspace). */
  workingDirectory?: string
  /** Environment added to every command (a call's own `env` wins). */
  env?: Record<string, string>
  /** Cap on each of stdout/stderr of `run` (past it output is dropped and stderr says so), and on
   * what a `spawn` stream holds unread. Default 1 MiB. */
  maxOutputBytes?: number
  /** Largest file a read or write moves, bytes; larger rejects. Default 64 MiB. */
  maxFileBytes?: number
  /** Deadline of `run` and `spawn`, seconds. Default: `run` the session's timeoutS, `spawn` none. */
  timeoutS?: number
  /** Text appended to `description` (what else the model should know about this machine). */
  description?: string
}

/** ai's `Experimental_SandboxSession`, plus port exposure. */
export interface KernSandboxSession extends Experimental_SandboxSession {
  /** Exposes a machine port on 127.0.0.1 of the host and names it in `description`. */
  exposePort(port: number): Promise<ExposedPort>
  /** The machine this session drives. */
  readonly machine: Machine
}

/** An `Experimental_SandboxSession` on `machine`: pass it as `experimental_sandbox` to
 * generateText/streamText/ToolLoopAgent. The machine stays the caller's to close. */
export function createSandboxSession(machine: Machine, opts?: SandboxSessionOptions): KernSandboxSession

export type CodeInterpreterLanguage = 'python' | 'javascript' | 'typescript'

export interface CodeInterpreterInput {
  code: string
  /** Present in the schema when the tool runs more than one language. */
  language?: CodeInterpreterLanguage | 'js' | 'ts'
}

/** One rich value of a cell, as JSON. Images are base64. */
export interface CodeInterpreterResult {
  isMainResult: boolean
  text?: string
  markdown?: string
  html?: string
  json?: string
  latex?: string
  svg?: string
  png?: string
  jpeg?: string
  /** A matplotlib figure read as data. */
  chart?: ChartTypes
}

export interface CodeInterpreterOutput {
  language: CodeInterpreterLanguage
  exitCode: number
  stdout: string
  stderr: string
  /** stdout/stderr were cut (at maxOutputBytes, or by the kernel's own cap). */
  truncated: boolean
  error: { name: string; value: string; traceback: string } | null
  fault: { type: string; message: string } | null
  results: CodeInterpreterResult[]
}

export interface CodeInterpreterOptions {
  /** With a Machine: the languages offered (the first is the default). Default all three. */
  languages?: Array<CodeInterpreterLanguage | 'js' | 'ts'>
  /** Per-cell deadline, seconds (a kernel past it is torn down; a Machine's is started again). */
  timeoutS?: number
  /** Cap on stdout, stderr, a traceback and each text result in the output, bytes. Default 32 KiB. */
  maxOutputBytes?: number
  /** Images sent to the model per call; later ones are named, not sent. Default 8. */
  maxImages?: number
  /** Largest image sent to the model, base64 bytes. Default 4 MiB. */
  maxImageBytes?: number
  description?: string
}

/** A tool running code in a warm kernel: the given Kernel, or one per language started in the
 * given Machine. Its model output is text, then each chart's data and image. */
export function codeInterpreterTool(
  kernelOrMachine: Kernel | Machine,
  opts?: CodeInterpreterOptions,
): Tool<CodeInterpreterInput, CodeInterpreterOutput>
