/**
 * Eugo Lab's JupyterLab extension: the "Eugo" side panel, a status bar item, vocabulary
 * tooltips in course notebooks and a launcher card that opens the course index.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ILauncher } from '@jupyterlab/launcher';
import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { IStatusBar } from '@jupyterlab/statusbar';
import { LabIcon } from '@jupyterlab/ui-components';
import { DocumentWidget } from '@jupyterlab/docregistry';

import { EugoModel } from './model';
import { EugoPanel } from './panel';
import { EugoStatusItem } from './statusbar';
import { buildMatcher, ITermMatcher, TermTooltip, watchNotebook } from './tooltips';

const ICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" width="16">' +
  '<path class="jp-icon3" fill="#616161" d="M5 4h13v3H9v3.5h8v3H9V17h9v3H5z"/></svg>';

export const eugoIcon = new LabIcon({ name: 'eugo-lab:icon', svgstr: ICON_SVG });

export const CommandIDs = {
  openIndex: 'eugo:open-course-index',
  showPanel: 'eugo:show-panel'
} as const;

/** Whether a cell's source runs the exercise checker (its result changes the progress store). */
function isExerciseCell(source: string): boolean {
  return /^\s*%%eugo\b[^\n]*--exercise\b/.test(source);
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'eugo-lab-labextension:plugin',
  description: 'Eugo Lab: courses and progress, the cluster and its cost, status bar and vocabulary tooltips.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [IStatusBar, ILauncher],
  activate: (
    app: JupyterFrontEnd,
    notebooks: INotebookTracker,
    statusBar: IStatusBar | null,
    launcher: ILauncher | null
  ) => {
    const model = new EugoModel();
    const open = (path: string): void => {
      void app.commands.execute('docmanager:open', { path });
    };
    const kernelPath = (kernelId: string): string | null => {
      for (const session of app.serviceManager.sessions.running()) {
        if (session.kernel?.id === kernelId) {
          return session.path;
        }
      }
      return null;
    };

    const panel = new EugoPanel({ model, open, kernelPath });
    panel.title.icon = eugoIcon;
    app.shell.add(panel, 'left', { rank: 150 });

    app.commands.addCommand(CommandIDs.showPanel, {
      label: 'Show the Eugo panel',
      execute: () => app.shell.activateById(panel.id)
    });
    app.commands.addCommand(CommandIDs.openIndex, {
      label: 'Eugo courses',
      caption: 'Open the Eugo course index',
      icon: eugoIcon,
      isEnabled: () => Boolean(model.courses?.index),
      execute: () => {
        const index = model.courses?.index;
        if (index) {
          open(index.path);
        }
      }
    });
    if (launcher !== null) {
      launcher.add({ command: CommandIDs.openIndex, category: 'Eugo', rank: 0 });
    }

    // Status bar: the runtime of the notebook in focus.
    if (statusBar !== null) {
      const activeKernel = (): string | null =>
        notebooks.currentWidget?.sessionContext.session?.kernel?.id ?? null;
      const item = new EugoStatusItem(model, activeKernel);
      item.node.addEventListener('click', () => app.shell.activateById(panel.id));
      statusBar.registerStatusItem('eugo-lab-labextension:status', {
        item,
        align: 'left',
        rank: 5,
        isActive: () => true
      });
      notebooks.currentChanged.connect(() => item.update());
    }

    // Progress: an exercise cell that finished has graded itself; show it without a reload.
    NotebookActions.executed.connect((_, args) => {
      if (args.cell.model.type === 'code' && isExerciseCell(args.cell.model.sharedModel.getSource())) {
        void model.refreshCourses();
      }
    });

    // Vocabulary tooltips in the course notebooks (not in the vocabulary itself).
    let matcher: ITermMatcher = buildMatcher([]);
    model.glossaryChanged.connect(() => {
      matcher = buildMatcher(model.glossary);
      notebooks.forEach(watchIfCourse);
    });
    const tooltip = new TermTooltip({
      vocabularyPath: () => model.courses?.vocabulary?.path ?? null,
      openEntry: anchor => {
        const path = model.courses?.vocabulary?.path;
        if (!path) {
          return;
        }
        void app.commands.execute('docmanager:open', { path }).then(widget => {
          if (widget instanceof DocumentWidget) {
            void widget.context.ready.then(() => widget.setFragment(`#${anchor}`));
          }
        });
      }
    });
    const watched = new WeakSet<NotebookPanel>();
    const isCourseNotebook = (path: string): boolean => {
      const root = model.coursesRoot;
      if (root === null || path === model.courses?.vocabulary?.path) {
        return false;
      }
      return root === '' || path.startsWith(`${root}/`);
    };
    function watchIfCourse(nb: NotebookPanel): void {
      if (watched.has(nb) || !isCourseNotebook(nb.context.path) || matcher.pattern === null) {
        return;
      }
      watched.add(nb);
      const stop = watchNotebook(nb, () => matcher, tooltip);
      nb.disposed.connect(stop);
    }
    notebooks.widgetAdded.connect((_, nb) => watchIfCourse(nb));
    model.coursesChanged.connect(() => notebooks.forEach(watchIfCourse));

    void app.restored.then(() => model.start());
    // keep a handle on the model for debugging from the browser console
    (window as unknown as { eugoLab?: EugoModel }).eugoLab = model;
  }
};

export default plugin;
