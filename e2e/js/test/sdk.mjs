// The JS SDK the suite runs against: `@langchain/langgraph-sdk` (the npm `latest`,
// 1.15.0) unless E2E_JS_SDK=2.0.0 picks the stale 2.0.0 major that clients may still
// pin (installed under the alias `@langchain/langgraph-sdk-2`). Tests import the
// SDK only through this file.
const VERSIONS = {
  "1.15.0": {
    main: "@langchain/langgraph-sdk",
    react: "@langchain/langgraph-sdk/react",
    reactUi: "@langchain/langgraph-sdk/react-ui",
  },
  "2.0.0": {
    main: "@langchain/langgraph-sdk-2",
    react: "@langchain/langgraph-sdk-2/react",
    reactUi: "@langchain/langgraph-sdk-2/react-ui",
  },
};

export const SDK_VERSION = process.env.E2E_JS_SDK || "1.15.0";
const paths = VERSIONS[SDK_VERSION];
if (paths === undefined) {
  throw new Error(`E2E_JS_SDK=${SDK_VERSION}: the suite knows ${Object.keys(VERSIONS).join(", ")}`);
}

const sdk = await import(paths.main);
export const { Client } = sdk;

/** The SDK's React entry point (`useStream`), loaded on demand: React needs a DOM first. */
export const loadReact = () => import(paths.react);

/** The SDK's generative UI entry point (`LoadExternalComponent`), also after a DOM. */
export const loadReactUi = () => import(paths.reactUi);
