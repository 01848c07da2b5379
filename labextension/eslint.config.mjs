// Lint of the TypeScript sources (run by `jlpm check`, which `make test` runs).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['lib/', 'lib-test/', 'node_modules/', '.yarn/', 'test/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['src/**/*.ts'],
    rules: {
      // User-controlled text goes through textContent: markup sinks are refused outright.
      'no-restricted-properties': ['error',
        { property: 'innerHTML', message: 'Use textContent (user text must never become markup).' },
        { property: 'outerHTML', message: 'Use textContent (user text must never become markup).' },
        { property: 'insertAdjacentHTML', message: 'Build elements and set textContent.' }],
      '@typescript-eslint/no-explicit-any': 'error',
      eqeqeq: ['error', 'smart']
    }
  }
);
