/**
 * One shared model behind the panel, the status bar and the tooltips: the courses with the
 * user's progress, the kernels' runtime status and the glossary, fetched from the server
 * extension and refreshed by polling.
 */
import { ISignal, Signal } from '@lumino/signaling';

import {
  fetchCourses,
  fetchGlossary,
  fetchStatus,
  ICourses,
  IGlossaryTerm,
  IStatus
} from './api';

/** Seconds between two status polls while the page is visible. */
export const STATUS_POLL_MS = 2000;
/** Courses progress is also refreshed on this interval (besides after every exercise cell). */
export const COURSES_POLL_MS = 15000;

/** A request's value, or null and the error's message (the last good value stays shown beside it). */
async function settle<T>(request: Promise<T>): Promise<[T | null, string | null]> {
  try {
    return [await request, null];
  } catch (error) {
    return [null, String((error as Error).message ?? error)];
  }
}

export class EugoModel {
  courses: ICourses | null = null;
  coursesError: string | null = null;
  status: IStatus | null = null;
  statusError: string | null = null;
  glossary: IGlossaryTerm[] = [];

  get coursesChanged(): ISignal<this, void> {
    return this._coursesChanged;
  }

  get statusChanged(): ISignal<this, void> {
    return this._statusChanged;
  }

  get glossaryChanged(): ISignal<this, void> {
    return this._glossaryChanged;
  }

  /** Start polling; the returned promise settles once the first courses, status and glossary are in. */
  start(): Promise<void> {
    this._timers.push(
      window.setInterval(() => {
        if (document.visibilityState === 'visible') {
          void this.refreshStatus();
        }
      }, STATUS_POLL_MS),
      window.setInterval(() => {
        if (document.visibilityState === 'visible') {
          void this.refreshCourses();
        }
      }, COURSES_POLL_MS)
    );
    return Promise.all([this.refreshCourses(), this.refreshStatus(), this.refreshGlossary()]).then(
      () => undefined
    );
  }

  dispose(): void {
    this._timers.forEach(t => window.clearInterval(t));
    this._timers = [];
  }

  async refreshCourses(): Promise<void> {
    const [value, error] = await settle(fetchCourses());
    this.courses = value ?? this.courses;
    this.coursesError = error;
    this._coursesChanged.emit();
  }

  async refreshStatus(): Promise<void> {
    const [value, error] = await settle(fetchStatus());
    this.status = value ?? this.status;
    this.statusError = error;
    this._statusChanged.emit();
  }

  async refreshGlossary(): Promise<void> {
    try {
      this.glossary = await fetchGlossary();
    } catch (error) {
      console.warn('eugo: the glossary is unavailable, so no vocabulary tooltips', error);
      this.glossary = [];
    }
    this._glossaryChanged.emit();
  }

  /** The folder that holds the courses (the vocabulary notebook's folder), "" for the server root. */
  get coursesRoot(): string | null {
    const vocabulary = this.courses?.vocabulary?.path;
    if (!vocabulary) {
      return null;
    }
    const slash = vocabulary.lastIndexOf('/');
    return slash < 0 ? '' : vocabulary.slice(0, slash);
  }

  private _timers: number[] = [];
  private _coursesChanged = new Signal<this, void>(this);
  private _statusChanged = new Signal<this, void>(this);
  private _glossaryChanged = new Signal<this, void>(this);
}
