// Unit tests of the wording the panel and the status bar show (src/format.ts, compiled to
// CommonJS in lib-test/ by `jlpm test`). Run with node's own test runner: no extra packages.
const test = require('node:test');
const assert = require('node:assert/strict');
const f = require('../lib-test/format.js');

const NOW = 1_000_000;
const running = extra => ({
  state: 'running', backend: 'local', workers: 2, running: 0, queued: 0, elapsed: 60, idle: 30,
  price: 0.1, cost: (2 * 60 * 0.1) / 3600, updated: NOW - 10, ...extra
});

test('an idle runtime keeps counting idle time, elapsed time and cost since its last publication', () => {
  const live = f.liveRuntime(running(), NOW);
  assert.equal(live.idle, 40);
  assert.equal(live.elapsed, 70);
  assert.ok(Math.abs(live.cost - (2 * 70 * 0.1) / 3600) < 1e-12);
});

test('a busy runtime is never idle, whatever it published before', () => {
  const live = f.liveRuntime(running({ running: 2, queued: 5 }), NOW);
  assert.equal(live.idle, 0);
  assert.equal(f.idleWarning(live, 1), null);
});

test('the idle warning appears at the threshold, in the words the panel shows', () => {
  const rt = running({ idle: 712, elapsed: 1440, cost: 0.08, updated: NOW });
  assert.equal(f.idleWarning(f.liveRuntime(rt, NOW), 713), null);
  assert.equal(f.idleWarning(f.liveRuntime(rt, NOW), 600), 'Idle cluster: 11 min idle, $0.08 so far at $0.10/worker-hour — stop it?');
});

test('durations and costs read as people read them', () => {
  assert.equal(f.formatDuration(5.9), '5 s');
  assert.equal(f.formatDuration(720), '12 min');
  assert.equal(f.formatDuration(3900), '1 h 05 min');
  assert.equal(f.formatCost(0.0007), '$0.0007');
  assert.equal(f.formatCost(0), '$0.00');
  assert.equal(f.formatCost(1.234), '$1.23');
  assert.equal(f.formatProgress(3, 5, 'exercise', 'passed'), '3 of 5 exercises passed');
  assert.equal(f.formatProgress(1, 1, 'item', 'ticked'), '1 of 1 item ticked');
});

test('the status bar says idle without a runtime, else workers, tasks and cost', () => {
  assert.equal(f.statusBarText(null, NOW), 'Eugo: idle');
  assert.equal(f.statusBarText({ state: 'none' }, NOW), 'Eugo: idle');
  assert.equal(f.statusBarText(running({ running: 2, queued: 3, updated: NOW }), NOW),
               'Eugo: 2 workers, 2 running, 3 queued, $0.0033 so far at $0.10/worker-hour');
  // every number with its unit: workers, and the cost in dollars (not a bare "0.0017")
  assert.equal(f.statusBarText(running({ workers: 1, cost: (60 * 0.1) / 3600, updated: NOW }), NOW),
               'Eugo: 1 worker, idle, $0.0017 so far at $0.10/worker-hour');
});

test('a pool on your own machine with no rate set has no bill, and a set rate is shown with every cost', () => {
  const own = running({ price: null, price_source: 'own machine', cost: null, updated: NOW });
  assert.equal(f.liveRuntime(own, NOW).cost, null);
  assert.equal(f.statusBarText(own, NOW), 'Eugo: 2 workers, idle, no bill (your own machine)');
  assert.equal(f.idleWarning(f.liveRuntime(own, NOW), 1), 'Idle cluster: 30 s idle, no bill (your own machine) — stop it?');
  const rated = running({ price: 0.096, cost: 0.5, updated: NOW });
  assert.equal(f.formatBill(f.liveRuntime(rated, NOW)), '$0.50 so far at $0.096/worker-hour');
});
