/** The status bar item: workers, running tasks and cost of the active notebook's Eugo runtime; "idle" otherwise. */
import { Widget } from '@lumino/widgets';

import { IKernelStatus } from './api';
import { statusBarText } from './format';
import { EugoModel } from './model';

export class EugoStatusItem extends Widget {
  constructor(
    private _model: EugoModel,
    /** The kernel id of the notebook in focus, if any. */
    private _activeKernel: () => string | null
  ) {
    super();
    this.addClass('eugo-StatusItem');
    this.node.title = 'Eugo runtime of the active notebook (click for the Eugo panel)';
    _model.statusChanged.connect(this.update, this);
    this.update();
  }

  /** Redraw now (the active notebook changed, or a new status arrived). */
  update(): void {
    const kernelId = this._activeKernel();
    let kernel: IKernelStatus | undefined;
    if (kernelId !== null && this._model.status !== null) {
      kernel = this._model.status.kernels.find(k => k.id === kernelId);
    }
    const runtime = kernel?.eugo ?? null;
    this.node.textContent = statusBarText(runtime, Date.now() / 1000);
    const busy = runtime !== null && runtime.state === 'running' && (runtime.running ?? 0) + (runtime.queued ?? 0) > 0;
    this.node.dataset.state = runtime !== null && runtime.state === 'running' ? (busy ? 'busy' : 'up') : 'idle';
  }

  dispose(): void {
    this._model.statusChanged.disconnect(this.update, this);
    super.dispose();
  }
}
