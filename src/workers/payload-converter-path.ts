/** The module with the worker's payload converter: the bundle and the worker must both name it. */
export const PAYLOAD_CONVERTER_PATH = require.resolve('../workflows/payload-converter');
