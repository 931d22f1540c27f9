// The OpenID Connect provider of Nessie in Cryo's tests: npm's oauth2-mock-server (discovery, JWKS,
// signed JWT access tokens), with the client-credentials grant checked against one configured client.
// The stock server issues a token to any client; here a wrong client id or secret is answered 401
// invalid_client, as a real provider does. The token's subject is the client id.
//
// Started by scripts/services.sh (scripts/peers.sh installs the package):
//   node oauth2-server.mjs <dir holding node_modules/oauth2-mock-server>
// Environment: OAUTH2_HOST (default 127.0.0.1), OAUTH2_PORT, OAUTH2_CLIENT_ID, OAUTH2_CLIENT_SECRET.
// The issuer is http://OAUTH2_HOST:OAUTH2_PORT; the token endpoint is {issuer}/token. The signing key
// is new at every start (tokens from an earlier run are refused).
import { timingSafeEqual } from "node:crypto";
import path from "node:path";
import { pathToFileURL } from "node:url";

const dir = process.argv[2];
if (!dir) {
  console.error("usage: node oauth2-server.mjs <dir holding node_modules/oauth2-mock-server>");
  process.exit(2);
}
const { OAuth2Server } = await import(
  pathToFileURL(path.join(dir, "node_modules", "oauth2-mock-server", "dist", "index.mjs")).href
);

const host = process.env.OAUTH2_HOST || "127.0.0.1";
const port = Number(process.env.OAUTH2_PORT || "0");
const clientId = process.env.OAUTH2_CLIENT_ID;
const clientSecret = process.env.OAUTH2_CLIENT_SECRET;
if (!clientId || !clientSecret) {
  console.error("set OAUTH2_CLIENT_ID and OAUTH2_CLIENT_SECRET");
  process.exit(2);
}

function same(want, got) {
  const a = Buffer.from(want, "utf8");
  const b = Buffer.from(typeof got === "string" ? got : "", "utf8");
  return a.length === b.length && timingSafeEqual(a, b);
}

// The client's id and secret: from the form, else from HTTP basic auth.
function client(req) {
  let id = req.body?.client_id;
  let secret = req.body?.client_secret;
  const auth = req.headers.authorization || "";
  if (id === undefined && /^basic /i.test(auth)) {
    const pair = Buffer.from(auth.slice(6).trim(), "base64").toString("utf8");
    const i = pair.indexOf(":");
    id = decodeURIComponent(i < 0 ? pair : pair.slice(0, i));
    secret = i < 0 ? undefined : decodeURIComponent(pair.slice(i + 1));
  }
  return { id, secret };
}

const server = new OAuth2Server();
await server.issuer.keys.generate("RS256");

server.service.on("beforeTokenSigning", (token, req) => {
  const { id } = client(req);
  if (id) token.payload.sub = id;
});
server.service.on("beforeResponse", (response, req) => {
  if (req.body?.grant_type !== "client_credentials") {
    response.statusCode = 400;
    response.body = { error: "unsupported_grant_type", error_description: "only client_credentials is served" };
    return;
  }
  const { id, secret } = client(req);
  if (id !== clientId || !same(clientSecret, secret)) {
    response.statusCode = 401;
    response.body = { error: "invalid_client", error_description: "unknown client or wrong secret" };
  }
});

// The stock issuer URL names "localhost" for 127.0.0.1: keep the address the server listens on.
server.issuer.url = port ? `http://${host}:${port}` : undefined;
await server.start(port, host);
console.log(`oauth2 server listening on ${server.issuer.url}, client ${clientId}`);

for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => {
    server.stop().finally(() => process.exit(0));
  });
}
