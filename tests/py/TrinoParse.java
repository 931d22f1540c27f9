// Trino's own parser over a batch of rendered statements (used by tests/py/test_inject.py).
//
// Run on Java 25 with the Trino server's libraries on the class path:
//   java -cp "$TRINO_HOME/lib/*" tests/py/TrinoParse.java < batch
// Input: one request per line, `S <base64 UTF-8 SQL>` (one statement) or `P <base64 UTF-8 script>`
// (a script: split with Trino's own lexer at top-level semicolons, comments skipped as hidden
// tokens, then every piece parsed). Output: one JSON object per request, in order.
//
// `SqlParser.createStatement` parses exactly one statement: trailing text (a second statement,
// an unterminated comment or string) is a parse error. For each statement it prints the kind,
// the target's name parts as written (`getOriginalParts`, before Trino's case folding), the
// procedure and argument names (and their string values), and every string literal and
// identifier in the WHERE or the properties, so the test compares them with what the plan intended.

import io.trino.grammar.sql.SqlBaseLexer;
import io.trino.sql.parser.SqlParser;
import io.trino.sql.tree.Analyze;
import io.trino.sql.tree.CallArgument;
import io.trino.sql.tree.Identifier;
import io.trino.sql.tree.Node;
import io.trino.sql.tree.Property;
import io.trino.sql.tree.QualifiedName;
import io.trino.sql.tree.Statement;
import io.trino.sql.tree.StringLiteral;
import io.trino.sql.tree.TableExecute;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import org.antlr.v4.runtime.CharStreams;
import org.antlr.v4.runtime.Token;
import org.antlr.v4.runtime.misc.Interval;

public class TrinoParse {
    static final SqlParser PARSER = new SqlParser();

    public static void main(String[] args) throws Exception {
        var in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        var out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            String text = new String(Base64.getDecoder().decode(line.substring(2)), StandardCharsets.UTF_8);
            out.append(line.charAt(0) == 'P' ? script(text) : statement(text, false)).append('\n');
        }
        System.out.write(out.toString().getBytes(StandardCharsets.UTF_8));
        System.out.flush();
    }

    /** Split with Trino's lexer: pieces between top-level `;` tokens that hold a visible token. */
    static String script(String text) {
        // Token indices count code points: the pieces are cut from the stream, not the String.
        var stream = CharStreams.fromString(text);
        var lexer = new SqlBaseLexer(stream);
        lexer.removeErrorListeners();
        List<String> pieces = new ArrayList<>();
        int start = -1;
        int stop = -1;
        for (Token t = lexer.nextToken(); t.getType() != Token.EOF; t = lexer.nextToken()) {
            if (t.getChannel() != Token.DEFAULT_CHANNEL) {
                continue;
            }
            if (t.getType() == SqlBaseLexer.SEMICOLON) {
                if (start >= 0) {
                    pieces.add(stream.getText(Interval.of(start, stop)));
                }
                start = -1;
                continue;
            }
            // A piece is the source text from its first visible token to its last (comments
            // between tokens stay, whitespace around it does not).
            if (start < 0) {
                start = t.getStartIndex();
            }
            stop = t.getStopIndex();
        }
        boolean visible = start >= 0;
        String rest = visible ? stream.getText(Interval.of(start, stop)) : "";
        var o = new Json().field("mode", "script");
        o.raw("trailing", visible ? quote(rest) : "null");
        var parsed = new StringBuilder("[");
        for (int i = 0; i < pieces.size(); i++) {
            parsed.append(i == 0 ? "" : ",").append(statement(pieces.get(i), true));
        }
        return o.raw("statements", parsed.append(']').toString()).end();
    }

    static String statement(String sql, boolean withSql) {
        var o = new Json().field("mode", "statement");
        if (withSql) {
            o.field("sql", sql);
        }
        Statement st;
        try {
            st = PARSER.createStatement(sql);
        } catch (RuntimeException e) {
            return o.raw("ok", "false").field("error", e.getClass().getSimpleName() + ": " + e.getMessage()).end();
        }
        o.raw("ok", "true").field("kind", st.getClass().getSimpleName());
        List<String> strings = new ArrayList<>();
        List<String> identifiers = new ArrayList<>();
        if (st instanceof TableExecute te) {
            o.raw("target", parts(te.getTable().getName()));
            o.field("procedure", te.getProcedureName().getValue());
            List<String> names = new ArrayList<>();
            List<String> argStrings = new ArrayList<>();
            for (CallArgument a : te.getArguments()) {
                names.add(a.getName().map(Identifier::getValue).orElse(""));
                collect(a.getValue(), argStrings, identifiers);
            }
            o.raw("arguments", list(names)).raw("argument_strings", list(argStrings));
            o.raw("has_where", te.getWhere().isPresent() ? "true" : "false");
            te.getWhere().ifPresent(w -> collect(w, strings, identifiers));
        } else if (st instanceof Analyze an) {
            o.raw("target", parts(an.getTableName()));
            List<String> names = new ArrayList<>();
            for (Property p : an.getProperties()) {
                names.add(p.getName().getValue());
                if (!p.isSetToDefault()) {
                    collect(p.getNonDefaultValue(), strings, identifiers);
                }
            }
            o.raw("arguments", list(names));
        }
        return o.raw("strings", list(strings)).raw("identifiers", list(identifiers)).end();
    }

    static String parts(QualifiedName name) {
        List<String> out = new ArrayList<>();
        for (Identifier i : name.getOriginalParts()) {
            out.add(i.getValue());
        }
        return list(out);
    }

    static void collect(Node n, List<String> strings, List<String> identifiers) {
        if (n instanceof StringLiteral s) {
            strings.add(s.getValue());
        } else if (n instanceof Identifier i) {
            identifiers.add(i.getValue());
        }
        for (Node c : n.getChildren()) {
            collect(c, strings, identifiers);
        }
    }

    static String list(List<String> xs) {
        var b = new StringBuilder("[");
        for (int i = 0; i < xs.size(); i++) {
            b.append(i == 0 ? "" : ",").append(quote(xs.get(i)));
        }
        return b.append(']').toString();
    }

    /** A JSON string, ASCII only (every other UTF-16 unit as \\uXXXX). */
    static String quote(String s) {
        var b = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\' || c < 0x20 || c > 0x7e) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    static final class Json {
        final StringBuilder b = new StringBuilder("{");

        Json field(String k, String v) {
            return raw(k, quote(v));
        }

        Json raw(String k, String v) {
            b.append(b.length() == 1 ? "" : ",").append(quote(k)).append(':').append(v);
            return this;
        }

        String end() {
            return b.append('}').toString();
        }
    }
}
