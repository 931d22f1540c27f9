/*
 * A Trino password authenticator plugin that checks user names and bcrypt hashes in a file: the
 * behaviour of the `file` authenticator of upstream's trino-password-authenticators plugin, whose
 * artifacts Maven Central does not carry (none from 477 on, and none at all in the registry this
 * project installs from). scripts/peers.sh compiles this file against the server's SPI and
 * at.favre.lib:bcrypt (the library upstream verifies with); scripts/services.sh configures it with
 * the same etc/password-authenticator.properties upstream reads:
 *
 *   password-authenticator.name=file
 *   file.password-file=/path/to/password.db      # lines `user:$2y$10$...` (bcrypt, cost >= 8)
 *
 * A wrong password, or an unknown user, is Trino's AccessDeniedException: the server answers
 * HTTP 401. Successful checks are cached (bcrypt costs ~50 ms, and Trino authenticates every
 * request of a query, each nextUri poll included), as upstream's `file.auth-token-cache` does.
 */
package cryo.trino.password;

import at.favre.lib.crypto.bcrypt.BCrypt;
import io.trino.spi.Plugin;
import io.trino.spi.security.AccessDeniedException;
import io.trino.spi.security.BasicPrincipal;
import io.trino.spi.security.PasswordAuthenticator;
import io.trino.spi.security.PasswordAuthenticatorFactory;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.Principal;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Pattern;

public final class FilePasswordAuthenticatorPlugin
        implements Plugin
{
    @Override
    public Iterable<PasswordAuthenticatorFactory> getPasswordAuthenticatorFactories()
    {
        return List.of(new Factory());
    }

    static final class Factory
            implements PasswordAuthenticatorFactory
    {
        static final String PASSWORD_FILE = "file.password-file";

        @Override
        public String getName()
        {
            return "file";
        }

        @Override
        public PasswordAuthenticator create(Map<String, String> config)
        {
            for (String key : config.keySet()) {
                if (!key.equals(PASSWORD_FILE)) {
                    throw new IllegalArgumentException("file password authenticator: unknown property " + key);
                }
            }
            String file = config.get(PASSWORD_FILE);
            if (file == null || file.isBlank()) {
                throw new IllegalArgumentException("file password authenticator: " + PASSWORD_FILE + " is required");
            }
            return new FileAuthenticator(Path.of(file));
        }
    }

    static final class FileAuthenticator
            implements PasswordAuthenticator
    {
        // bcrypt's modular crypt format: $2a$/$2b$/$2y$, a two-digit cost, 53 characters of salt and hash.
        private static final Pattern BCRYPT = Pattern.compile("\\$2[aby]\\$(\\d\\d)\\$[./A-Za-z0-9]{53}");
        private static final int MIN_COST = 8;
        private static final int CACHE_LIMIT = 1000;

        private final Map<String, String> hashes = new HashMap<>();
        private final Map<String, byte[]> verified = new ConcurrentHashMap<>();

        FileAuthenticator(Path file)
        {
            List<String> lines;
            try {
                lines = Files.readAllLines(file, StandardCharsets.UTF_8);
            }
            catch (IOException e) {
                throw new UncheckedIOException("file password authenticator: cannot read " + file, e);
            }
            for (int i = 0; i < lines.size(); i++) {
                String line = lines.get(i).strip();
                if (line.isEmpty() || line.startsWith("#")) {
                    continue;
                }
                int colon = line.indexOf(':');
                String where = file + " line " + (i + 1);
                if (colon <= 0) {
                    throw new IllegalArgumentException("file password authenticator: " + where + " is not `user:hash`");
                }
                String user = line.substring(0, colon);
                String hash = line.substring(colon + 1);
                var m = BCRYPT.matcher(hash);
                // Never the hash itself in a message: the file is a secret.
                if (!m.matches()) {
                    throw new IllegalArgumentException("file password authenticator: " + where + ": not a bcrypt hash");
                }
                if (Integer.parseInt(m.group(1)) < MIN_COST) {
                    throw new IllegalArgumentException("file password authenticator: " + where + ": bcrypt cost below " + MIN_COST);
                }
                if (hashes.put(user, hash) != null) {
                    throw new IllegalArgumentException("file password authenticator: " + where + ": user " + user + " is listed twice");
                }
            }
        }

        // Deprecated in the SPI but still abstract, and what the server asks when
        // createAuthenticatedIdentity (default: empty) has no answer.
        @SuppressWarnings("deprecation")
        @Override
        public Principal createAuthenticatedPrincipal(String user, String password)
        {
            String hash = hashes.get(user);
            if (hash == null) {
                throw new AccessDeniedException("Invalid credentials");
            }
            byte[] digest = sha256(user + '\0' + password);
            byte[] known = verified.get(user);
            if (known != null && MessageDigest.isEqual(known, digest)) {
                return new BasicPrincipal(user);
            }
            if (!BCrypt.verifyer().verify(password.toCharArray(), hash.toCharArray()).verified) {
                throw new AccessDeniedException("Invalid credentials");
            }
            if (verified.size() >= CACHE_LIMIT) {
                verified.clear();
            }
            verified.put(user, digest);
            return new BasicPrincipal(user);
        }

        private static byte[] sha256(String s)
        {
            try {
                return MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8));
            }
            catch (NoSuchAlgorithmException e) {
                throw new IllegalStateException(e);
            }
        }
    }
}
