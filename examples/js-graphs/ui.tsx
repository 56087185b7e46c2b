// Generative UI components of the `echo` graph (langgraph.json's `ui`): the server
// bundles this file at boot and serves it under /ui, for the SDK's
// LoadExternalComponent (@langchain/langgraph-sdk/react-ui) to render in a front end.
import "./ui.css";

function Greeting(props: { text?: string }) {
  return <p className="greeting">echo says: {props.text ?? "hello"}</p>;
}

export default { greeting: Greeting };
