import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/**
 * Warden's custom search attributes. The embedded dev server registers them at start
 * (`--search-attribute`); a cluster needs them registered once (see docs/operations.md, "Temporal server").
 */
export const WardenStage = defineSearchAttributeKey('WardenStage', SearchAttributeType.KEYWORD);
export const WardenStatus = defineSearchAttributeKey('WardenStatus', SearchAttributeType.KEYWORD);
export const WardenGate = defineSearchAttributeKey('WardenGate', SearchAttributeType.KEYWORD);
export const WardenRepo = defineSearchAttributeKey('WardenRepo', SearchAttributeType.KEYWORD);

/** Name → type, as `temporal server start-dev --search-attribute NAME=TYPE` wants them. */
export const SEARCH_ATTRIBUTE_DEFINITIONS: Readonly<Record<string, 'Keyword'>> = {
  WardenStage: 'Keyword',
  WardenStatus: 'Keyword',
  WardenGate: 'Keyword',
  WardenRepo: 'Keyword',
};
