// Channels: the inbound channel routes the server has (read-only; changes take
// effect after a restart). A server without channel routes has no inventory route:
// /info's flags.channels says so, and a 404 means the same.

import { ApiError, get } from "../api.js";
import { empty, h, pageHead, section, table } from "../ui.js";

export async function render() {
  return h(
    "div.view",
    pageHead("Channels", "Inbound channel routes, from the server's configuration."),
    section(
      "Channel routes",
      async () => {
        // A server that says it has no channel routes is not asked for them.
        const info = await get("/info");
        if (info?.flags?.channels === false) return null;
        try {
          return await get("/channels");
        } catch (error) {
          if (error instanceof ApiError && error.status === 404) return null;
          throw error;
        }
      },
      (channels) => {
        if (channels === null) return empty("No channel routes are configured on this server (service.channels).");
        const list = Array.isArray(channels) ? channels : (channels.channels ?? []);
        return table(list, [
          ["Route", (c) => c.name ?? c.route ?? "—"],
          ["Provider", (c) => c.provider ?? "—"],
          ["Default assistant", (c) => c.default_assistant ?? c.assistant_id ?? "—"],
          ["Allowed assistants", (c) => (c.allowed_assistants ?? []).join(", ") || "—"],
          // Replies are named by their channel only (SPEC console item 9).
          ["Outbound", (c) => (c.outbound ?? c.outbound_implemented ? "yes" : "no")],
        ], "No channel routes.");
      },
    ),
  );
}
