<?php

// A scripted HTTP server for the client's tests: answers 503, drops, stalls, or forwards to delayq,
// one scripted action per request, and logs what it received and on which connection.
//
//   php fake-server.php <action,action,...> <upstream URL or ""> <log file>
//
// Prints its port on the first line of stdout. Requests past the end of the script are forwarded;
// without an upstream, "forward" answers 200 with an empty body (a webhook receiver). Connections
// are numbered from 1 in the order accepted; a connection kept open is read for more requests.
// Actions:
//   forward       forward to the upstream, answer with Content-Length and Connection: close, close
//   503[:s]       answer 503 redis_unavailable with Retry-After: s (default 1)
//   degraded      answer 503 with a /health "degraded" body
//   drop          close without answering (the upstream never sees the request)
//   drop-after    forward, then close without answering (done, but the caller never hears)
//   hold          forward, answer with Content-Length and keep-alive, keep the connection open
//   hold-chunked  forward, answer chunked with keep-alive, keep the connection open
//   hangup        forward, answer with keep-alive, then close anyway (a server whose idle timeout
//                 ends a kept-alive connection before the client uses it again)
//   stall         answer headers and part of the body, then nothing, never close
//   html          answer 200 with an HTML page
//   html502       answer 502 with an HTML page
//   json:s:b64    answer status s with the JSON body given in base64

declare(strict_types=1);

[, $script, $upstream, $logFile] = $argv + [null, '', '', '/dev/null'];
$actions = $script === '' ? [] : explode(',', $script);

$server = stream_socket_server('tcp://127.0.0.1:0', $errno, $error);
if ($server === false) {
    fwrite(STDERR, "fake-server: cannot listen: {$error}\n");
    exit(1);
}
$name = (string) stream_socket_get_name($server, false);
fwrite(STDOUT, substr($name, strrpos($name, ':') + 1) . "\n");
fflush(STDOUT);

$log = fopen($logFile, 'ab');
/** @var array<int, resource> $open connections read for their next request, by number */
$open = [];
/** @var list<resource> $stalled connections left hanging, never read or closed */
$stalled = [];
$accepted = 0;
$served = 0;

while (true) {
    $readable = array_values($open);
    $readable[] = $server;
    $none = null;
    if (@stream_select($readable, $none, $none, 3600) < 1) {
        continue;
    }
    foreach ($readable as $ready) {
        if ($ready === $server) {
            $connection = @stream_socket_accept($server, 0);
            if ($connection !== false) {
                stream_set_timeout($connection, 10);
                $open[++$accepted] = $connection;
            }
            continue;
        }
        $number = (int) array_search($ready, $open, true);
        unset($open[$number]);
        $request = readRequest($ready);
        if ($request === null) {
            fclose($ready); // the client closed it, or sent half a request
            continue;
        }
        $action = $actions[$served] ?? 'forward';
        $served++;
        fwrite($log, json_encode($request + ['action' => $action, 'connection' => $number], JSON_UNESCAPED_SLASHES) . "\n");
        fflush($log);
        match (serve($ready, $action, $request, $upstream)) {
            'keep' => $open[$number] = $ready,
            'stall' => $stalled[] = $ready,
            'close' => fclose($ready),
        };
    }
}

/**
 * Carries out one action on the connection; what becomes of the connection afterwards.
 *
 * @param resource $connection
 * @param array{method: string, path: string, headers: array<string, string>, body: string} $request
 * @return 'keep'|'stall'|'close'
 */
function serve($connection, string $action, array $request, string $upstream): string
{
    [$kind, $argument] = explode(':', $action, 2) + [1 => null];
    switch ($kind) {
        case '503':
            $retryAfter = $argument ?? '1';
            answer($connection, 503, 'application/json', '{"error":{"code":"redis_unavailable",'
                . '"message":"fake: Redis does not answer"}}', ["Retry-After: {$retryAfter}"]);
            return 'close';
        case 'degraded':
            answer($connection, 503, 'application/json', '{"status":"degraded","redis":"unreachable",'
                . '"message":"fake: Redis does not answer"}', ['Retry-After: 1']);
            return 'close';
        case 'drop':
            return 'close';
        case 'drop-after':
            forward($upstream, $request);
            return 'close';
        case 'hold':
        case 'hangup':
            [$status, $type, $body] = forward($upstream, $request);
            answer($connection, $status, $type, $body, ['Connection: keep-alive', 'Keep-Alive: timeout=600']);
            return $kind === 'hold' ? 'keep' : 'close';
        case 'hold-chunked':
            [$status, $type, $body] = forward($upstream, $request);
            $chunks = '';
            foreach (str_split($body, max(1, intdiv(strlen($body), 3))) as $chunk) {
                $chunks .= dechex(strlen($chunk)) . "\r\n" . $chunk . "\r\n";
            }
            fwrite($connection, "HTTP/1.1 {$status} X\r\nContent-Type: {$type}\r\n"
                . "Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n{$chunks}0\r\n\r\n");
            fflush($connection);
            return 'keep';
        case 'stall':
            fwrite($connection, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                . "Content-Length: 1000\r\n\r\n{\"status\":");
            fflush($connection);
            return 'stall';
        case 'html':
            answer($connection, 200, 'text/html', '<html><body>Welcome to nginx!</body></html>');
            return 'close';
        case 'json':
            [$status, $encoded] = explode(':', (string) $argument, 2);
            answer($connection, (int) $status, 'application/json', (string) base64_decode($encoded, true));
            return 'close';
        case 'html502':
            answer($connection, 502, 'text/html', '<html><body>502 Bad Gateway</body></html>');
            return 'close';
        default:
            [$status, $type, $body] = forward($upstream, $request);
            answer($connection, $status, $type, $body);
            return 'close';
    }
}

/**
 * @param resource $connection
 * @return array{method: string, path: string, headers: array<string, string>, body: string}|null
 */
function readRequest($connection): ?array
{
    $head = '';
    while (!str_contains($head, "\r\n\r\n")) {
        $line = fgets($connection);
        if ($line === false) {
            return null;
        }
        $head .= $line;
    }
    $lines = explode("\r\n", trim($head));
    [$method, $path] = explode(' ', (string) array_shift($lines)) + [1 => '/'];
    $headers = [];
    foreach ($lines as $line) {
        [$key, $value] = explode(':', $line, 2) + [1 => ''];
        $headers[strtolower(trim($key))] = trim($value);
    }
    $length = (int) ($headers['content-length'] ?? 0);
    $body = '';
    while (strlen($body) < $length) {
        $chunk = fread($connection, $length - strlen($body));
        if ($chunk === false || $chunk === '') {
            return null;
        }
        $body .= $chunk;
    }
    return ['method' => $method, 'path' => $path, 'headers' => $headers, 'body' => $body];
}

/**
 * @param array{method: string, path: string, headers: array<string, string>, body: string} $request
 * @return array{int, string, string} status, content type, body
 */
function forward(string $upstream, array $request): array
{
    if ($upstream === '') {
        return [200, 'text/plain', '']; // a bare receiver: 200, empty body
    }
    $headers = ['Connection: close', 'Expect:'];
    foreach (['authorization', 'content-type'] as $name) {
        if (isset($request['headers'][$name])) {
            $headers[] = "{$name}: {$request['headers'][$name]}";
        }
    }
    $handle = curl_init($upstream . $request['path']);
    curl_setopt_array($handle, [
        CURLOPT_CUSTOMREQUEST => $request['method'],
        CURLOPT_HTTPHEADER => $headers,
        CURLOPT_RETURNTRANSFER => true,
        CURLOPT_TIMEOUT => 60,
    ]);
    if ($request['body'] !== '') {
        curl_setopt($handle, CURLOPT_POSTFIELDS, $request['body']);
    }
    $body = curl_exec($handle);
    $status = (int) curl_getinfo($handle, CURLINFO_RESPONSE_CODE);
    $type = (string) curl_getinfo($handle, CURLINFO_CONTENT_TYPE);
    if (!is_string($body) || $status === 0) {
        return [502, 'text/plain', 'fake-server: upstream failed: ' . curl_error($handle)];
    }
    return [$status, $type === '' ? 'application/json' : $type, $body];
}

/**
 * @param resource $connection
 * @param list<string> $extra
 */
function answer($connection, int $status, string $type, string $body, array $extra = []): void
{
    $headers = array_merge(["Content-Type: {$type}", 'Content-Length: ' . strlen($body)], $extra);
    if (!preg_grep('/^Connection:/i', $extra)) {
        $headers[] = 'Connection: close';
    }
    fwrite($connection, "HTTP/1.1 {$status} X\r\n" . implode("\r\n", $headers) . "\r\n\r\n" . $body);
    fflush($connection);
}
