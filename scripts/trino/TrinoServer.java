/*
 * The main class of Trino's server distribution (core/trino-server-main in trinodb/trino), which
 * Maven Central does not carry: Cryo's scripts/peers.sh assembles a Trino server from the published
 * io.trino:trino-main and io.trino:trino-iceberg artifacts and compiles this file against them.
 * Upstream reads the release number from its jar manifest; here scripts/services.sh passes it as
 * -Dcryo.trino.version. Everything else is Trino's own io.trino.server.Server.
 */
package io.trino.server;

public final class TrinoServer
{
    private TrinoServer() {}

    public static void main(String[] args)
    {
        Runtime.Version javaVersion = Runtime.version();
        if (javaVersion.feature() < 25) {
            System.err.printf("ERROR: Trino requires Java 25+ (found %s)%n", javaVersion);
            System.exit(100);
        }
        new Server().start(System.getProperty("cryo.trino.version", "unknown"));
    }
}
