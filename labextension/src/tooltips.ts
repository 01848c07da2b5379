/**
 * Vocabulary tooltips: in rendered Markdown cells of course notebooks, the first use of each
 * glossary term (or of one of its aliases) in a cell is marked; hovering it shows the
 * definition and a link to the term's entry in the vocabulary notebook.
 */
import { NotebookPanel } from '@jupyterlab/notebook';

import { IGlossaryTerm } from './api';
import { el } from './dom';

/** Aliases shorter than this are too likely to be ordinary words ("io", "arm", "get"). */
const MIN_ALIAS_LENGTH = 4;
/**
 * Aliases that prose uses in their everyday sense far more often than as the term ("in order"
 * is not "Submission order"): the glossary keeps them for `%eugo glossary`, the tooltips do not.
 */
const EVERYDAY_ALIASES = new Set([
  'block', 'chunk', 'chunks', 'feeding', 'idle', 'in order', 'parallel', 'profile', 'scheduling',
  'side by side', 'submission', 'tail', 'transfer', 'batch', 'optimize', 'optimization'
]);
/**
 * Elements whose text is never marked: code is code, headings stay plain. Links are marked
 * (a lesson's first use of a term links to its vocabulary entry: that is where a definition helps).
 */
const SKIP = 'code, pre, h1, h2, h3, .eugo-Term, .MathJax, mjx-container';

export interface ITermMatcher {
  /** The regular expression that finds any term or alias (whole words, case-insensitive). */
  pattern: RegExp | null;
  /** Lower-cased term or alias -> its glossary entry. */
  byName: Map<string, IGlossaryTerm>;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The anchor of a term in the vocabulary notebook: the term as written, spaces replaced by "-". */
export function termAnchor(term: IGlossaryTerm): string {
  return term.anchor || term.term.replace(/ /g, '-');
}

export function buildMatcher(terms: IGlossaryTerm[]): ITermMatcher {
  const byName = new Map<string, IGlossaryTerm>();
  for (const term of terms) {
    byName.set(term.term.toLowerCase(), term);
  }
  for (const term of terms) {
    for (const alias of term.aliases ?? []) {
      const key = alias.toLowerCase();
      if (alias.length >= MIN_ALIAS_LENGTH && !EVERYDAY_ALIASES.has(key) && !byName.has(key)) {
        byName.set(key, term);
      }
    }
  }
  // longest first, so "scheduling overhead" wins over "overhead"; whole words only, where a term may
  // itself end in a non-word character ("get()"), so no \b
  const names = [...byName.keys()].sort((a, b) => b.length - a.length);
  const pattern = names.length
    ? new RegExp(`(?<![\\w.])(?:${names.map(escapeRegExp).join('|')})(?![\\w])`, 'gi')
    : null;
  return { pattern, byName };
}

export interface ITooltipOptions {
  /** The vocabulary notebook's path (relative to the server root). */
  vocabularyPath: () => string | null;
  /** Open the vocabulary notebook at a term's entry. */
  openEntry: (anchor: string) => void;
}

/** One floating tooltip for the whole page, shown over whichever marked term the mouse is on. */
export class TermTooltip {
  constructor(private _options: ITooltipOptions) {
    this.node = el('div', 'eugo-TermTooltip');
    this.node.setAttribute('role', 'tooltip');
    this.node.style.display = 'none';
    this.node.addEventListener('mouseenter', () => this._cancelHide());
    this.node.addEventListener('mouseleave', () => this._scheduleHide());
    document.body.appendChild(this.node);
  }

  readonly node: HTMLDivElement;

  show(target: HTMLElement, term: IGlossaryTerm): void {
    this._cancelHide();
    const node = this.node;
    while (node.firstChild) {
      node.removeChild(node.firstChild);
    }
    node.appendChild(el('div', 'eugo-TermTooltip-term', term.term));
    node.appendChild(el('div', 'eugo-TermTooltip-definition', term.definition));
    if (this._options.vocabularyPath() !== null) {
      const link = el('a', 'eugo-TermTooltip-link', 'Open in the vocabulary →');
      link.href = '#';
      link.addEventListener('click', event => {
        event.preventDefault();
        this.hide();
        this._options.openEntry(termAnchor(term));
      });
      node.appendChild(link);
    }
    node.style.display = 'block';
    const rect = target.getBoundingClientRect();
    const width = Math.min(360, window.innerWidth - 16);
    node.style.maxWidth = `${width}px`;
    node.style.left = `${Math.max(8, Math.min(rect.left, window.innerWidth - width - 8))}px`;
    const below = rect.bottom + 6;
    const height = node.offsetHeight;
    node.style.top = `${below + height < window.innerHeight ? below : Math.max(8, rect.top - height - 6)}px`;
  }

  hide(): void {
    this.node.style.display = 'none';
  }

  dispose(): void {
    this._cancelHide();
    this.node.remove();
  }

  _scheduleHide(): void {
    this._cancelHide();
    this._hideTimer = window.setTimeout(() => this.hide(), 250);
  }

  private _cancelHide(): void {
    if (this._hideTimer !== null) {
      window.clearTimeout(this._hideTimer);
      this._hideTimer = null;
    }
  }

  private _hideTimer: number | null = null;
}

/** Mark the terms in one rendered Markdown element (once per term per element); returns how many. */
export function markTerms(root: HTMLElement, matcher: ITermMatcher): number {
  const pattern = matcher.pattern;
  if (pattern === null) {
    return 0;
  }
  const seen = new Set<IGlossaryTerm>();
  root.querySelectorAll<HTMLElement>('.eugo-Term').forEach(node => {
    const term = matcher.byName.get((node.dataset.term ?? '').toLowerCase());
    if (term) {
      seen.add(term);
    }
  });
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
    acceptNode: node =>
      node.parentElement === null || node.parentElement.closest(SKIP) !== null
        ? NodeFilter.FILTER_REJECT
        : NodeFilter.FILTER_ACCEPT
  });
  const texts: Text[] = [];
  while (walker.nextNode()) {
    texts.push(walker.currentNode as Text);
  }
  let marked = 0;
  for (const text of texts) {
    const value = text.data;
    pattern.lastIndex = 0;
    let match: RegExpExecArray | null;
    let last = 0;
    const pieces: Node[] = [];
    while ((match = pattern.exec(value)) !== null) {
      const term = matcher.byName.get(match[0].toLowerCase());
      if (!term || seen.has(term)) {
        continue;
      }
      seen.add(term);
      pieces.push(document.createTextNode(value.slice(last, match.index)));
      const span = el('span', 'eugo-Term', match[0]);
      span.dataset.term = term.term;
      pieces.push(span);
      last = match.index + match[0].length;
      marked++;
    }
    if (pieces.length) {
      pieces.push(document.createTextNode(value.slice(last)));
      text.replaceWith(...pieces);
    }
  }
  return marked;
}

/**
 * Watch one notebook: whenever its rendered Markdown changes, mark the terms again.
 * Returns a function that stops watching.
 */
export function watchNotebook(
  panel: NotebookPanel,
  matcher: () => ITermMatcher,
  tooltip: TermTooltip
): () => void {
  const content = panel.content.node;
  let pending = 0;
  const scan = (): void => {
    pending = 0;
    const m = matcher();
    content.querySelectorAll<HTMLElement>('.jp-MarkdownCell .jp-RenderedMarkdown').forEach(node => {
      markTerms(node, m);
    });
  };
  const observer = new MutationObserver(() => {
    if (pending === 0) {
      pending = window.setTimeout(scan, 150);
    }
  });
  observer.observe(content, { childList: true, subtree: true, characterData: true });
  const over = (event: MouseEvent): void => {
    const target = (event.target as HTMLElement).closest<HTMLElement>('.eugo-Term');
    if (target === null) {
      return;
    }
    const term = matcher().byName.get((target.dataset.term ?? '').toLowerCase());
    if (term) {
      tooltip.show(target, term);
    }
  };
  const out = (event: MouseEvent): void => {
    if ((event.target as HTMLElement).closest('.eugo-Term') !== null) {
      tooltip._scheduleHide();
    }
  };
  content.addEventListener('mouseover', over);
  content.addEventListener('mouseout', out);
  scan();
  return () => {
    observer.disconnect();
    window.clearTimeout(pending);
    content.removeEventListener('mouseover', over);
    content.removeEventListener('mouseout', out);
  };
}
