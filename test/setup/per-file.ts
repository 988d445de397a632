/**
 * After each test file: stop the git launcher its modules started (src/activities/launcher.ts).
 * Every test file has its own copy of the modules, so each would otherwise leave one idle
 * launcher behind in the jest worker until the worker exits.
 */
import { stopLauncher } from '../../src/activities/launcher';

afterAll(() => stopLauncher());
