import HammockCore
import HammockJSON

extension RESTOptions {
    /// What `hammock schema` tells editors about a `rest` source's options: the keys `keys` names, each as
    /// `init` reads it (a test holds the two lists equal).
    static let schema: JSONValue = JSONSchema.object(
        "A rest source: one HTTP request per load (one per page with paginate).",
        properties: [
            "url": JSONSchema.string(
                "The http:// or https:// URL to load. {{ source.key }} templates are filled in from other sources, percent-encoded; `query` is appended.",
                minLength: 1),
            "method": JSONSchema.anyOf(
                "The HTTP method (any case): GET (the default), POST, PUT, PATCH, DELETE or HEAD. HEAD gives {status, headers} as content.",
                [
                    ["enum": .array(methods.map(JSONValue.string))],
                    ["type": "string", "pattern": .string(caseInsensitivePattern(methods))],
                    JSONSchema.substituted,
                ]),
            "headers": JSONSchema.map(
                "Request headers, name: value. An empty value leaves the header out (`X-Token: ${TOKEN:-}`); ${NAME} values here are secrets, redacted from every output. They go only to the url's own origin, never across a redirect.",
                values: scalarText),
            "auth": JSONSchema.anyOf(
                "Credentials, sent as the Authorization header (not with headers.Authorization): { bearer: TOKEN }, { basic: { username, password } } or { oauth2: { token-url, client-id, client-secret, ... } }. ${NAME} values here are secrets; an empty bearer token sends none.",
                [
                    JSONSchema.object(
                        "Authorization: Bearer TOKEN.",
                        properties: ["bearer": JSONSchema.string("The token (one word of visible ASCII); empty sends no Authorization.")],
                        required: ["bearer"]),
                    JSONSchema.object(
                        "Authorization: Basic, base64 of username:password (RFC 7617).",
                        properties: [
                            "basic": JSONSchema.object(
                                "The credentials.",
                                properties: [
                                    "username": JSONSchema.string("The user name; it may not hold a colon."),
                                    "password": JSONSchema.string("The password (default empty)."),
                                ],
                                required: ["username"])
                        ],
                        required: ["basic"]),
                    JSONSchema.object(
                        "Authorization: Bearer with an OAuth2 access token that hammock gets from token-url, keeps until it expires (renewing it a little before), and replaces once when the API answers 401.",
                        properties: ["oauth2": oauth2Schema],
                        required: ["oauth2"]),
                ]),
            "query": JSONSchema.map(
                "Query parameters, name: value, percent-encoded and appended to the url.", values: scalarText),
            "body": JSONSchema.anyOf(
                "The request body: a string is sent as it is; a mapping or list is sent as JSON (with Content-Type: application/json unless headers give one). Not with HEAD.",
                [["type": "string"], ["type": "object"], ["type": "array"]]),
            "parse": JSONSchema.word(
                Parse.allCases.map(\.rawValue),
                "How the answer becomes content: json, jsonl (JSON Lines: one value per line, as an array) or text. Without it, by the answer's Content-Type (application/json and */*+json are JSON; application/x-ndjson and application/jsonl are JSON Lines)."),
            "maxBytes": JSONSchema.size(
                "The largest answer to read, in bytes or as a size such as 512KiB or 10MiB (the default); a larger one is an error with code tooLarge."),
            "followRedirects": JSONSchema.boolean(
                "Follow 3xx redirects (the default, true). A redirect to another origin carries none of `headers`."),
            "paginate": paginateSchema,
            "expose-headers": JSONSchema.list(
                "Response headers to copy into the state's meta.headers (by lowercased name), e.g. [X-RateLimit-Remaining]; none by default. At most 32, each value cut at 1 KiB.",
                items: JSONSchema.string("A header name.", minLength: 1)),
        ],
        required: ["url"])

    static let oauth2Schema: JSONValue = {
        guard
            case .object(var schema) = JSONSchema.object(
                "OAuth2 (RFC 6749): client_credentials, or refresh_token with a refresh token.",
                properties: [
                    "token-url": JSONSchema.string("The token endpoint, http:// or https://; no {{ templates }}.", minLength: 1),
                    "client-id": JSONSchema.string("The client's id.", minLength: 1),
                    "client-secret": JSONSchema.string(
                        "The client's secret (needed for client_credentials); write it as ${secret:NAME}, ${file:PATH} or ${cred:NAME}.", minLength: 1),
                    "scope": JSONSchema.string("The scope to ask for (space-separated), if any."),
                    "grant": JSONSchema.word(
                        OAuth2Options.Grant.allCases.map(\.rawValue),
                        "client_credentials (the default) or refresh_token (needs refresh-token)."),
                    "refresh-token": JSONSchema.string(
                        "grant: refresh_token: the refresh token; a new one the endpoint hands out replaces it in memory.", minLength: 1),
                    "client-auth": JSONSchema.word(
                        OAuth2Options.ClientAuth.allCases.map(\.rawValue),
                        "How the client id and secret reach the token endpoint: basic (HTTP Basic, the default) or body (client_id and client_secret in the form)."),
                    "params": JSONSchema.map(
                        "More fields of the token request's form, name: value, such as { audience: https://api.example.com } (not grant_type, client_id, client_secret, refresh_token or scope).",
                        values: scalarText),
                    "cache": JSONSchema.boolean(
                        "Also keep the token in the offline cache folder (oauth2/, file mode 0600), so a restart reuses it until it expires (default false: memory only)."),
                ],
                required: ["token-url", "client-id"])
        else { preconditionFailure("JSONSchema.object gives an object") }
        schema["if"] = ["properties": ["grant": ["const": "refresh_token"]], "required": ["grant"]]
        schema["then"] = ["required": ["refresh-token"]]
        schema["else"] = ["required": ["client-secret"], "properties": ["refresh-token": false]]
        return .object(schema)
    }()

    /// A header, query or environment value: numbers and booleans are taken as their text.
    static let scalarText: JSONValue = ["type": ["string", "number", "boolean"]]

    static let paginateSchema: JSONValue = {
        let number = { (description: String, minimum: Int) in
            JSONSchema.integer(description, minimum: minimum, maximum: Pagination.largestNumber)
        }
        guard
            case .object(var schema) = JSONSchema.object(
                "Walk the pages of a list and join them into one array: { style: link } follows Link: <…>; rel=\"next\"; { style: page, param: page, sizeParam: per_page, size: 50 } counts pages up until one is short or empty.",
                properties: [
                    "style": JSONSchema.word(["link", "page"], "link: follow the Link header's rel=\"next\"; page: ask for ?page=1, 2, …"),
                    "param": JSONSchema.string("style: page: the query parameter of the page number (default page).", minLength: 1),
                    "start": number("style: page: the number of the first page (default 1).", 0),
                    "sizeParam": JSONSchema.string("style: page: the query parameter of the page size (needs size).", minLength: 1),
                    "size": number("style: page: the page size to ask for; a shorter page is the last.", 1),
                    "limit": number("At most this many items in all.", 1),
                    "maxPages": number("At most this many pages (default 100), against a server that never stops.", 1),
                    "lazy": JSONSchema.boolean(
                        "Load the first page only; the control op more (count: N) loads the next N and keeps them on refresh. Default false: every page."),
                ],
                required: ["style"])
        else { preconditionFailure("JSONSchema.object gives an object") }
        schema["dependentRequired"] = ["sizeParam": ["size"]]
        // param, start, sizeParam and size are for style: page.
        schema["if"] = ["properties": ["style": ["const": "link"]], "required": ["style"]]
        schema["then"] = ["properties": ["param": false, "start": false, "sizeParam": false, "size": false]]
        return .object(schema)
    }()

    /// `^(GET|POST)$` with each letter in either case: ECMA-262 patterns have no case-insensitive flag.
    static func caseInsensitivePattern(_ words: [String]) -> String {
        let alternatives = words.map { word in
            word.map { letter in "[\(letter.uppercased())\(letter.lowercased())]" }.joined()
        }
        return "^(" + alternatives.joined(separator: "|") + ")$"
    }
}
