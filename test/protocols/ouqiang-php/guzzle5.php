<?php
// A stand-in for the part of Guzzle 5 that ouqiang's PHP client calls (it requires guzzle ^5.0,
// which no package source here carries): new Client(['base_url' => ..., 'defaults' => ['timeout'
// => ...]]), ->post($url, ['json' => $value]) and the response's ->json(). Requests go out with
// cURL. URLs resolve as Guzzle 5's Url::combine does (RFC 3986): a path that starts with "/"
// replaces the base URL's whole path, so the client can only reach a server at a host's root.

namespace GuzzleHttp;

class Client
{
    private $baseUrl;
    private $timeout;

    public function __construct(array $config = [])
    {
        $this->baseUrl = isset($config['base_url']) ? $config['base_url'] : '';
        $this->timeout = isset($config['defaults']['timeout']) ? $config['defaults']['timeout'] : 0;
    }

    public function post($url, array $options = [])
    {
        $headers = [];
        $body = '';
        if (array_key_exists('json', $options)) {
            $body = json_encode($options['json']);
            $headers[] = 'Content-Type: application/json';
        }
        $curl = curl_init(self::resolve($this->baseUrl, $url));
        curl_setopt_array($curl, [
            CURLOPT_POST => true,
            CURLOPT_POSTFIELDS => $body,
            CURLOPT_HTTPHEADER => $headers,
            CURLOPT_RETURNTRANSFER => true,
            CURLOPT_TIMEOUT => $this->timeout,
            CURLOPT_FOLLOWLOCATION => false,
        ]);
        $text = curl_exec($curl);
        if ($text === false) {
            throw new \RuntimeException('cURL error: ' . curl_error($curl));
        }
        $status = curl_getinfo($curl, CURLINFO_RESPONSE_CODE);
        // Guzzle 5 throws on 4xx and 5xx answers (its "exceptions" option is on by default).
        if ($status >= 400) {
            throw new \RuntimeException("Server answered HTTP $status");
        }
        return new Response($status, $text);
    }

    /** A reference resolved against the base URL, the way Guzzle 5 does it. */
    public static function resolve($base, $reference)
    {
        if (preg_match('#^[a-z][a-z0-9+.-]*://#i', $reference)) {
            return $reference;
        }
        if ($reference === '') {
            return $base;
        }
        $parts = parse_url($base);
        $origin = $parts['scheme'] . '://' . $parts['host']
            . (isset($parts['port']) ? ':' . $parts['port'] : '');
        $path = isset($parts['path']) ? $parts['path'] : '';
        if ($reference[0] === '/' || $path === '') {
            return $origin . ($reference[0] === '/' ? '' : '/') . $reference;
        }
        return $origin . substr($path, 0, strrpos($path, '/') + 1) . $reference;
    }
}

class Response
{
    private $status;
    private $body;

    public function __construct($status, $body)
    {
        $this->status = $status;
        $this->body = $body;
    }

    public function getStatusCode()
    {
        return $this->status;
    }

    public function json()
    {
        $data = json_decode($this->body, true);
        if (json_last_error() !== JSON_ERROR_NONE) {
            throw new \RuntimeException('Unable to parse JSON data: ' . json_last_error_msg());
        }
        return $data;
    }
}
