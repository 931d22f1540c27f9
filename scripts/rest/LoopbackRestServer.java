/*
 * Iceberg's REST test fixture (RESTCatalogAdapter + RESTCatalogServlet from the runnable
 * org.apache.iceberg:iceberg-open-api:1.10.1 jar) as a REST catalog server for Cryo's tests, with
 * what the stock RESTCatalogServer lacks and real servers have:
 *
 *   - it listens on one address (127.0.0.1) instead of every interface;
 *   - a route prefix, announced in /v1/config overrides; every other route must carry it (a request
 *     without it is answered 404);
 *   - OAuth2 client credentials at /v1/oauth/tokens, checked against one configured client (a wrong
 *     secret is answered 401 invalid_client), and a bearer token required on every other route,
 *     /v1/config included;
 *   - storage credentials in the LoadTableResult of loadTable, createTable and commits (in `config`
 *     and in `storage-credentials`), answered only to X-Iceberg-Access-Delegation:
 *     vended-credentials; without that header the client gets none.
 *
 * Compiled by Cryo's scripts/peers.sh (javac --release 17 against the fixture jar); started by
 * scripts/services.sh:
 *   java -cp cryo-rest-fixture.jar:iceberg-open-api-1.10.1.jar org.apache.iceberg.rest.LoopbackRestServer
 *
 * Configuration: CATALOG_* environment variables as for the stock server (CATALOG_X__Y_Z is the
 * catalog property "x-y.z"): the backend catalog's (default: JdbcCatalog on an in-memory sqlite
 * database, one connection), plus rest.host, rest.port, rest.prefix, rest.oauth.client-id,
 * rest.oauth.client-secret, and vended.<property> (e.g. vended.s3.access-key-id): the storage
 * properties vended. Nothing secret is logged.
 */
package org.apache.iceberg.rest;

import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletRequestWrapper;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.Base64;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.rest.credentials.ImmutableCredential;
import org.apache.iceberg.rest.responses.ConfigResponse;
import org.apache.iceberg.rest.responses.LoadTableResponse;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.server.handler.gzip.GzipHandler;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;

public final class LoopbackRestServer {
  private LoopbackRestServer() {}

  /** Whether the request being served asked for vended credentials (set by the servlet). */
  private static final ThreadLocal<Boolean> WANTS_VENDED = ThreadLocal.withInitial(() -> false);

  static final class Adapter extends RESTCatalogAdapter {
    private final String prefix;
    private final Map<String, String> vended = new HashMap<>();

    Adapter(Catalog catalog, Map<String, String> props, String prefix) {
      super(catalog);
      this.prefix = prefix;
      props.forEach(
          (k, v) -> {
            if (k.startsWith("vended.")) {
              vended.put(k.substring("vended.".length()), v);
            }
          });
    }

    @Override
    public <T extends RESTResponse> T handleRequest(
        Route route, Map<String, String> vars, Object body, Class<T> responseType) {
      T resp = super.handleRequest(route, vars, body, responseType);
      if (route == Route.CONFIG && prefix != null && resp instanceof ConfigResponse) {
        ConfigResponse cfg = (ConfigResponse) resp;
        return castResponse(
            responseType,
            ConfigResponse.builder()
                .withDefaults(cfg.defaults())
                .withOverrides(cfg.overrides())
                .withOverride("prefix", prefix)
                .withEndpoints(cfg.endpoints())
                .build());
      }
      if (resp instanceof LoadTableResponse && WANTS_VENDED.get() && !vended.isEmpty()) {
        LoadTableResponse load = (LoadTableResponse) resp;
        return castResponse(
            responseType,
            LoadTableResponse.builder()
                .withTableMetadata(load.tableMetadata())
                .addAllConfig(load.config())
                .addAllConfig(vended)
                .addAllCredentials(load.credentials())
                .addCredential(
                    ImmutableCredential.builder()
                        .prefix(load.tableMetadata().location())
                        .putAllConfig(vended)
                        .build())
                .build());
      }
      return resp;
    }
  }

  static final class Servlet extends RESTCatalogServlet {
    private static final String TOKENS = "/v1/oauth/tokens";

    private final String prefix;
    private final String clientId;
    private final String clientSecret;
    private final Set<String> tokens = ConcurrentHashMap.newKeySet();
    private final SecureRandom random = new SecureRandom();

    Servlet(RESTCatalogAdapter adapter, String prefix, String clientId, String clientSecret) {
      super(adapter);
      this.prefix = prefix;
      this.clientId = clientId;
      this.clientSecret = clientSecret;
    }

    @Override
    protected void service(HttpServletRequest req, HttpServletResponse resp)
        throws IOException, ServletException {
      String uri = req.getRequestURI();
      if (clientId != null) {
        if (uri.equals(TOKENS)) {
          issueToken(req, resp);
          return;
        }
        String auth = req.getHeader("Authorization");
        String token =
            auth != null && auth.regionMatches(true, 0, "Bearer ", 0, 7)
                ? auth.substring(7).trim()
                : null;
        if (token == null || !tokens.contains(token)) {
          error(resp, 401, "NotAuthorizedException", "missing or unknown bearer token");
          return;
        }
      }
      String rewritten = uri;
      if (prefix != null && !uri.equals("/v1/config")) {
        String p = "/v1/" + prefix + "/";
        if (!uri.startsWith(p)) {
          error(resp, 404, "NoSuchRouteException", "this server's routes start with " + p);
          return;
        }
        rewritten = "/v1/" + uri.substring(p.length());
      }
      String delegation = req.getHeader("X-Iceberg-Access-Delegation");
      WANTS_VENDED.set(
          delegation != null
              && delegation.toLowerCase(Locale.ROOT).contains("vended-credentials"));
      String path = rewritten;
      try {
        super.service(
            new HttpServletRequestWrapper(req) {
              @Override
              public String getRequestURI() {
                return path;
              }
            },
            resp);
      } finally {
        WANTS_VENDED.remove();
      }
    }

    /** The client-credentials grant (client id and secret in the form, or HTTP basic auth). */
    private void issueToken(HttpServletRequest req, HttpServletResponse resp) throws IOException {
      String grant = req.getParameter("grant_type");
      String id = req.getParameter("client_id");
      String secret = req.getParameter("client_secret");
      String basic = req.getHeader("Authorization");
      if (id == null && basic != null && basic.regionMatches(true, 0, "Basic ", 0, 6)) {
        String[] pair =
            new String(
                    Base64.getDecoder().decode(basic.substring(6).trim()), StandardCharsets.UTF_8)
                .split(":", 2);
        id = pair[0];
        secret = pair.length > 1 ? pair[1] : null;
      }
      if (!"client_credentials".equals(grant)) {
        oauthError(resp, 400, "unsupported_grant_type", "only client_credentials is served");
        return;
      }
      if (!clientId.equals(id) || !same(clientSecret, secret)) {
        oauthError(resp, 401, "invalid_client", "unknown client or wrong secret");
        return;
      }
      byte[] raw = new byte[24];
      random.nextBytes(raw);
      String token = Base64.getUrlEncoder().withoutPadding().encodeToString(raw);
      tokens.add(token);
      write(
          resp,
          200,
          "{\"access_token\":\""
              + token
              + "\",\"token_type\":\"bearer\",\"expires_in\":3600,"
              + "\"issued_token_type\":\"urn:ietf:params:oauth:token-type:access_token\"}");
    }

    private static boolean same(String want, String got) {
      return got != null
          && MessageDigest.isEqual(
              want.getBytes(StandardCharsets.UTF_8), got.getBytes(StandardCharsets.UTF_8));
    }

    private static void oauthError(
        HttpServletResponse resp, int code, String error, String description) throws IOException {
      write(
          resp,
          code,
          "{\"error\":\"" + error + "\",\"error_description\":\"" + json(description) + "\"}");
    }

    private static void error(HttpServletResponse resp, int code, String type, String msg)
        throws IOException {
      write(
          resp,
          code,
          "{\"error\":{\"message\":\""
              + json(msg)
              + "\",\"type\":\""
              + type
              + "\",\"code\":"
              + code
              + "}}");
    }

    private static String json(String s) {
      StringBuilder b = new StringBuilder();
      for (char c : s.toCharArray()) {
        if (c == '"' || c == '\\') {
          b.append('\\').append(c);
        } else if (c < 0x20) {
          b.append(String.format("\\u%04x", (int) c));
        } else {
          b.append(c);
        }
      }
      return b.toString();
    }

    private static void write(HttpServletResponse resp, int code, String json) throws IOException {
      resp.setStatus(code);
      resp.setContentType("application/json");
      resp.setCharacterEncoding("UTF-8");
      resp.getWriter().write(json);
    }
  }

  public static void main(String[] args) throws Exception {
    Map<String, String> props = new HashMap<>(RCKUtils.environmentCatalogConfig());
    props.putIfAbsent("catalog-impl", "org.apache.iceberg.jdbc.JdbcCatalog");
    props.putIfAbsent("uri", "jdbc:sqlite::memory:");
    props.putIfAbsent("jdbc.schema-version", "V1");
    // An in-memory sqlite database lives in its connection: one connection for every request.
    props.putIfAbsent("clients", "1");
    if (!props.containsKey("warehouse")) {
      throw new IllegalArgumentException("set CATALOG_WAREHOUSE (e.g. s3://bucket/wh)");
    }
    String host = props.getOrDefault("rest.host", "127.0.0.1");
    int port = Integer.parseInt(props.getOrDefault("rest.port", "8181"));
    String prefix = props.get("rest.prefix");
    String clientId = props.get("rest.oauth.client-id");
    String clientSecret = props.get("rest.oauth.client-secret");
    if ((clientId == null) != (clientSecret == null)) {
      throw new IllegalArgumentException(
          "set both CATALOG_REST_OAUTH_CLIENT__ID and CATALOG_REST_OAUTH_CLIENT__SECRET, or neither");
    }
    Catalog catalog = CatalogUtil.buildIcebergCatalog("rest_backend", props, new Configuration());

    Servlet servlet =
        new Servlet(new Adapter(catalog, props, prefix), prefix, clientId, clientSecret);
    ServletContextHandler context = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    context.addServlet(new ServletHolder(servlet), "/*");
    context.insertHandler(new GzipHandler());

    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost(host);
    connector.setPort(port);
    server.addConnector(connector);
    server.setHandler(context);
    server.start();
    System.out.println(
        "iceberg rest fixture listening on http://"
            + host
            + ":"
            + port
            + (prefix != null ? ", prefix " + prefix : "")
            + (clientId != null ? ", OAuth2 client " + clientId : ", no authentication")
            + ", vended credentials: "
            + props.keySet().stream().filter(k -> k.startsWith("vended.")).sorted().toList());
    server.join();
  }
}
