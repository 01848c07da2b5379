/**
 * The Eugo server extension's REST API (`/eugo/api/...` under the server's base URL), typed.
 *
 * Every request goes through `ServerConnection.makeRequest`, which adds the token and the
 * XSRF header the handlers require.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

export type ExerciseStatus = 'passed' | 'not yet' | 'not tried';

export interface IExercise {
  id: string;
  title: string;
  status: ExerciseStatus;
  when?: string | null;
  /** How many hint tiers the learner was shown for it, over all attempts. */
  hints_taken?: number;
}

export interface ILesson {
  path: string;
  title: string;
  exercises: IExercise[];
}

export interface ICourse {
  id: string;
  title: string;
  path: string;
  lessons: ILesson[];
  passed: number;
  total: number;
}

export interface IChecklistItem {
  id: string;
  text: string;
  ticked: boolean;
  how?: string | null;
  evidence?: string | null;
}

export interface IChecklist {
  id: string;
  title: string;
  /** The checklist's notebook, or null where the courses hold none for it. */
  path: string | null;
  items: IChecklistItem[];
  ticked: number;
  total: number;
}

export interface INotebookRef {
  path: string;
  title: string;
}

export interface ICourses {
  courses: ICourse[];
  checklists: IChecklist[];
  vocabulary?: INotebookRef | null;
  index?: INotebookRef | null;
}

export interface IGlossaryTerm {
  term: string;
  definition: string;
  aliases?: string[];
  see_also?: string[];
  lesson?: string | null;
  anchor?: string | null;
}

export interface IRuntime {
  state: 'running' | 'none';
  backend?: string;
  workers?: number;
  running?: number;
  queued?: number;
  submitted?: number;
  elapsed?: number;
  idle?: number;
  /** per worker-hour; null: no bill (a pool on your own machine with no rate set) */
  price?: number | null;
  /** where the price came from: "--price", "hpc.init(price_per_worker_hour=...)", the setting, "example rate..." */
  price_source?: string;
  cost?: number | null;
  tracing?: boolean;
  updated?: number;
}

export interface IKernelStatus {
  id: string;
  name: string;
  execution_state: string;
  connections: number;
  eugo: IRuntime | null;
}

export interface IStatus {
  eugo_lab: string;
  server_version: string;
  idle_warning_s?: number;
  kernels: IKernelStatus[];
}

/** Seconds of idleness after which a runtime is flagged, when the server does not say. */
export const DEFAULT_IDLE_WARNING_S = 600;

/** An API call that failed: the HTTP status and the server's message. */
export class EugoAPIError extends Error {
  constructor(
    readonly status: number,
    message: string
  ) {
    super(message);
  }
}

/** Call `/eugo/api/<endpoint>` and return its JSON body; a non-2xx answer throws `EugoAPIError`. */
export async function requestAPI<T>(endpoint: string, init: RequestInit = {}): Promise<T> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, 'eugo', 'api', endpoint);
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new ServerConnection.NetworkError(error as TypeError);
  }
  const text = await response.text();
  let body: unknown = null;
  if (text.length > 0) {
    try {
      body = JSON.parse(text);
    } catch {
      body = null;
    }
  }
  if (!response.ok) {
    const message =
      body !== null && typeof body === 'object' && 'message' in body
        ? String((body as { message: unknown }).message)
        : `${response.status} ${response.statusText}`;
    throw new EugoAPIError(response.status, `/eugo/api/${endpoint}: ${message}`);
  }
  return body as T;
}

export const fetchCourses = (): Promise<ICourses> => requestAPI<ICourses>('courses');
export const fetchStatus = (): Promise<IStatus> => requestAPI<IStatus>('status');

export async function fetchGlossary(): Promise<IGlossaryTerm[]> {
  const body = await requestAPI<{ terms: IGlossaryTerm[] }>('glossary');
  return body.terms;
}

/** Tick or untick one checklist item; returns the stored item. */
export async function postProgress(
  checklist: string,
  item: string,
  ticked: boolean
): Promise<IChecklistItem> {
  const body = await requestAPI<{ ok: boolean; item: IChecklistItem }>('progress', {
    method: 'POST',
    body: JSON.stringify({ checklist, item, ticked })
  });
  return body.item;
}

/** Stop the Eugo runtime of one kernel (the kernel itself keeps running). */
export async function stopRuntime(kernelId: string): Promise<boolean> {
  const body = await requestAPI<{ stopped: boolean }>(
    `kernels/${encodeURIComponent(kernelId)}/stop`,
    { method: 'POST', body: '{}' }
  );
  return body.stopped;
}
