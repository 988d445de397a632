/** Everything the worker loads into the workflow sandbox. */
export { intentWorkflow } from './intent-workflow';
export { maintenanceWorkflow } from './maintenance-workflow';
export { sweepWorkflow } from './sweep-workflow';
export { notificationWorkflow } from './notification-workflow';
export { ledgerAnchorWorkflow } from './ledger-anchor-workflow';
