/**
 * The "Eugo" side panel: courses and their lessons with exercise progress, checklists with
 * tickable items, and one section per kernel whose Eugo runtime is running (workers, tasks,
 * idle time, cost so far with its rate (or no bill on your own machine), an idle warning and a Stop button).
 */
import { Widget } from '@lumino/widgets';

import {
  DEFAULT_IDLE_WARNING_S,
  IChecklist,
  IChecklistItem,
  ICourse,
  IExercise,
  IKernelStatus,
  postProgress,
  stopRuntime
} from './api';
import { clear, el } from './dom';
import { formatBill, formatDuration, formatProgress, idleWarning, liveRuntime, plural } from './format';
import { EugoModel } from './model';

export interface IPanelOptions {
  model: EugoModel;
  /** Open a notebook (a path relative to the server root). */
  open: (path: string) => void;
  /** The notebook path of a kernel's session, if the kernel belongs to one. */
  kernelPath: (kernelId: string) => string | null;
}

const STATUS_MARK: Record<IExercise['status'], string> = {
  passed: '✓',
  'not yet': '•',
  'not tried': '○'
};

export class EugoPanel extends Widget {
  constructor(options: IPanelOptions) {
    super();
    this._options = options;
    this.id = 'eugo-panel';
    this.addClass('eugo-Panel');
    this.title.caption = 'Eugo: courses, progress and your cluster';

    const header = el('div', 'eugo-Panel-header');
    header.appendChild(el('h2', 'eugo-Panel-title', 'Eugo'));
    const refresh = el('button', 'eugo-Button eugo-Panel-refresh', 'Refresh');
    refresh.title = 'Reload courses progress and the cluster status';
    refresh.addEventListener('click', () => {
      void options.model.refreshCourses();
      void options.model.refreshStatus();
    });
    header.appendChild(refresh);
    this.node.appendChild(header);

    this._cluster = el('section', 'eugo-Section eugo-Cluster');
    this._courses = el('section', 'eugo-Section eugo-Courses');
    this._checklists = el('section', 'eugo-Section eugo-Checklists');
    this.node.append(this._cluster, this._courses, this._checklists);

    options.model.coursesChanged.connect(this._renderCourses, this);
    options.model.statusChanged.connect(this._renderCluster, this);
    this._renderCourses();
    this._renderCluster();
  }

  dispose(): void {
    this._options.model.coursesChanged.disconnect(this._renderCourses, this);
    this._options.model.statusChanged.disconnect(this._renderCluster, this);
    super.dispose();
  }

  private _renderCourses(): void {
    const { model, open } = this._options;
    clear(this._checklists);
    startSection(this._courses, 'Courses', 'Courses', model.coursesError);
    const data = model.courses;
    if (data === null) {
      if (model.coursesError === null) {
        this._courses.appendChild(el('p', 'eugo-Muted', 'Loading…'));
      }
      return;
    }
    const links = el('div', 'eugo-Links');
    for (const ref of [data.index, data.vocabulary]) {
      if (ref) {
        const a = el('a', 'eugo-Link', ref.title);
        a.href = '#';
        a.addEventListener('click', event => {
          event.preventDefault();
          open(ref.path);
        });
        links.appendChild(a);
      }
    }
    this._courses.appendChild(links);
    const list = el('ul', 'eugo-CourseList');
    for (const course of data.courses) {
      list.appendChild(this._course(course));
    }
    this._courses.appendChild(list);

    this._checklists.appendChild(el('h3', 'eugo-Section-title', 'Checklists'));
    const checklists = el('ul', 'eugo-ChecklistList');
    for (const checklist of data.checklists) {
      checklists.appendChild(this._checklist(checklist));
    }
    this._checklists.appendChild(checklists);
  }

  private _course(course: ICourse): HTMLElement {
    const item = el('li', 'eugo-Course');
    item.dataset.course = course.id;
    const expanded = this._expanded.has(`course:${course.id}`);
    const head = el('div', 'eugo-Course-head');
    const toggle = el('button', 'eugo-Toggle', expanded ? '▾' : '▸');
    toggle.title = expanded ? 'Hide the lessons' : 'Show the lessons';
    head.appendChild(toggle);
    head.appendChild(el('span', 'eugo-Course-title', course.title));
    const count = el('span', 'eugo-Count', `${course.passed}/${course.total}`);
    count.title = formatProgress(course.passed, course.total, 'exercise', 'passed');
    head.appendChild(count);
    head.addEventListener('click', () => this._toggle(`course:${course.id}`));
    item.appendChild(head);
    item.appendChild(progressBar(course.passed, course.total, count.title));
    if (!expanded) {
      return item;
    }
    const lessons = el('ul', 'eugo-LessonList');
    for (const lesson of course.lessons) {
      const li = el('li', 'eugo-Lesson');
      li.dataset.path = lesson.path;
      const link = el('a', 'eugo-Lesson-title', lesson.title);
      link.href = '#';
      link.title = `Open ${lesson.path}`;
      link.addEventListener('click', event => {
        event.preventDefault();
        this._options.open(lesson.path);
      });
      li.appendChild(link);
      for (const exercise of lesson.exercises) {
        const ex = el('span', `eugo-Exercise eugo-Exercise-${exercise.status.replace(' ', '-')}`);
        ex.dataset.exercise = exercise.id;
        ex.dataset.status = exercise.status;
        ex.appendChild(el('span', 'eugo-Exercise-mark', STATUS_MARK[exercise.status] ?? '?'));
        ex.appendChild(el('span', 'eugo-Exercise-title', exercise.title));
        const hints = exercise.hints_taken ?? 0;
        if (hints > 0) {
          ex.appendChild(el('span', 'eugo-Exercise-hints', plural(hints, 'hint')));
        }
        ex.title = `${exercise.title}: ${exercise.status}` + (exercise.when ? ` (${exercise.when})` : '') +
          (hints > 0 ? `, ${plural(hints, 'hint')} taken` : '');
        li.appendChild(ex);
      }
      lessons.appendChild(li);
    }
    item.appendChild(lessons);
    return item;
  }

  private _checklist(checklist: IChecklist): HTMLElement {
    const item = el('li', 'eugo-Checklist');
    item.dataset.checklist = checklist.id;
    const key = `checklist:${checklist.id}`;
    const expanded = this._expanded.has(key);
    const head = el('div', 'eugo-Course-head');
    head.appendChild(el('button', 'eugo-Toggle', expanded ? '▾' : '▸'));
    head.appendChild(el('span', 'eugo-Course-title', checklist.title));
    const count = el('span', 'eugo-Count', `${checklist.ticked}/${checklist.total}`);
    count.title = formatProgress(checklist.ticked, checklist.total, 'item', 'ticked');
    head.appendChild(count);
    head.addEventListener('click', () => this._toggle(key));
    item.appendChild(head);
    item.appendChild(progressBar(checklist.ticked, checklist.total, count.title));
    if (!expanded) {
      return item;
    }
    const path = checklist.path;
    if (path !== null) {
      const open = el('a', 'eugo-Link', 'Open the checklist notebook');
      open.href = '#';
      open.addEventListener('click', event => {
        event.preventDefault();
        this._options.open(path);
      });
      item.appendChild(open);
    }
    const items = el('ul', 'eugo-ItemList');
    for (const entry of checklist.items) {
      items.appendChild(this._checklistItem(checklist, entry));
    }
    item.appendChild(items);
    return item;
  }

  private _checklistItem(checklist: IChecklist, entry: IChecklistItem): HTMLElement {
    const li = el('li', 'eugo-Item');
    li.dataset.item = entry.id;
    const label = el('label', 'eugo-Item-label');
    const box = el('input', 'eugo-Item-box');
    box.type = 'checkbox';
    box.checked = entry.ticked;
    const error = el('span', 'eugo-Error');
    box.addEventListener('change', () => {
      const wanted = box.checked;
      box.disabled = true;
      error.textContent = '';
      postProgress(checklist.id, entry.id, wanted)
        .then(stored => {
          entry.ticked = stored.ticked;
          checklist.ticked += stored.ticked === wanted ? (wanted ? 1 : -1) : 0;
          void this._options.model.refreshCourses();
        })
        .catch((reason: Error) => {
          box.checked = !wanted;
          box.disabled = false;
          error.textContent = `Not saved: ${reason.message}`;
        });
    });
    label.appendChild(box);
    label.appendChild(el('span', 'eugo-Item-text', entry.text));
    li.appendChild(label);
    const details = [entry.how ? `How: ${entry.how}` : '', entry.evidence ? `Evidence: ${entry.evidence}` : '']
      .filter(Boolean)
      .join('\n');
    if (details) {
      li.title = details;
    }
    li.appendChild(error);
    return li;
  }

  private _toggle(key: string): void {
    if (this._expanded.has(key)) {
      this._expanded.delete(key);
    } else {
      this._expanded.add(key);
    }
    this._renderCourses();
  }

  private _renderCluster(): void {
    const { model } = this._options;
    startSection(this._cluster, 'Your cluster', 'Status', model.statusError);
    const status = model.status;
    if (status === null) {
      return;
    }
    const threshold = status.idle_warning_s ?? DEFAULT_IDLE_WARNING_S;
    const running = status.kernels.filter(k => k.eugo !== null && k.eugo.state === 'running');
    if (running.length === 0) {
      this._cluster.appendChild(
        el('p', 'eugo-Muted eugo-Cluster-none', 'No Eugo runtime is running: nothing is billing.')
      );
      return;
    }
    const now = Date.now() / 1000;
    for (const kernel of running) {
      this._cluster.appendChild(this._runtime(kernel, threshold, now));
    }
  }

  private _runtime(kernel: IKernelStatus, threshold: number, now: number): HTMLElement {
    const live = liveRuntime(kernel.eugo!, now);
    const box = el('div', 'eugo-Runtime');
    box.dataset.kernel = kernel.id;
    const path = this._options.kernelPath(kernel.id);
    box.appendChild(el('div', 'eugo-Runtime-name', path ?? `kernel ${kernel.id.slice(0, 8)}`));
    const rows: [string, string][] = [
      ['Backend', live.backend],
      ['Workers', plural(live.workers, 'worker')],
      ['Tasks', `${live.running} running, ${live.queued} queued`],
      ['Idle', live.running + live.queued > 0 ? 'no (busy)' : formatDuration(live.idle)],
      ['Cost', formatBill(live)]
    ];
    const table = el('dl', 'eugo-Runtime-rows');
    for (const [name, value] of rows) {
      table.appendChild(el('dt', undefined, name));
      table.appendChild(el('dd', undefined, value));
    }
    box.appendChild(table);
    const warning = idleWarning(live, threshold);
    if (warning !== null) {
      box.classList.add('eugo-Runtime-idle');
      box.appendChild(el('p', 'eugo-IdleWarning', warning));
    }
    const stop = el('button', 'eugo-Button eugo-Stop', 'Stop');
    stop.title = `Stop this notebook's Eugo runtime (${plural(live.workers, 'worker')}); the kernel keeps its variables`;
    const error = el('span', 'eugo-Error');
    stop.addEventListener('click', () => {
      stop.disabled = true;
      stop.textContent = 'Stopping…';
      stopRuntime(kernel.id)
        .then(() => this._options.model.refreshStatus())
        .catch((reason: Error) => {
          stop.disabled = false;
          stop.textContent = 'Stop';
          error.textContent = `Not stopped: ${reason.message}`;
        });
    });
    box.append(stop, error);
    return box;
  }

  private _options: IPanelOptions;
  private _cluster: HTMLElement;
  private _courses: HTMLElement;
  private _checklists: HTMLElement;
  private _expanded = new Set<string>();
}

function progressBar(done: number, total: number, title: string): HTMLElement {
  const bar = el('div', 'eugo-Progress');
  const fill = el('div', 'eugo-Progress-fill');
  fill.style.width = `${total > 0 ? Math.round((100 * done) / total) : 0}%`;
  bar.appendChild(fill);
  bar.title = title;
  return bar;
}

/** Empty `section` and head it with `title`; when its data failed to load, say so: "`what` unavailable: `error`". */
function startSection(section: HTMLElement, title: string, what: string, error: string | null): void {
  clear(section);
  section.appendChild(el('h3', 'eugo-Section-title', title));
  if (error !== null) {
    section.appendChild(el('p', 'eugo-Error', `${what} unavailable: ${error}`));
  }
}
