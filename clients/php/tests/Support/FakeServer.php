<?php

// Runs fake-server.php as a child process for one test, and reads back what it received.

declare(strict_types=1);

namespace Delayq\Tests\Support;

final class FakeServer
{
    /** @var resource */
    private $process;
    private string $logFile;
    public readonly string $url;

    /**
     * @param list<string> $actions one per request, in order (see fake-server.php); then "forward"
     * @param string|null $upstream where "forward" sends requests: the service under test
     */
    public function __construct(array $actions, ?string $upstream = null)
    {
        $this->logFile = (string) tempnam(sys_get_temp_dir(), 'delayq-fake-');
        $process = proc_open(
            [PHP_BINARY, __DIR__ . '/fake-server.php', implode(',', $actions), $upstream ?? '', $this->logFile],
            [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['file', '/dev/null', 'w']],
            $pipes,
        );
        if (!is_resource($process)) {
            throw new \RuntimeException('cannot start fake-server.php');
        }
        $this->process = $process;
        $read = [$pipes[1]];
        $none = null;
        if (stream_select($read, $none, $none, 10) !== 1) {
            $this->stop();
            throw new \RuntimeException('fake-server.php did not print its port within 10 s');
        }
        $port = trim((string) fgets($pipes[1]));
        if (preg_match('/^\d+$/', $port) !== 1) {
            $this->stop();
            throw new \RuntimeException("fake-server.php printed no port: {$port}");
        }
        $this->url = "http://127.0.0.1:{$port}";
    }

    /**
     * What the server received so far, in order.
     *
     * @return list<array{method: string, path: string, headers: array<string, string>, body: string, action: string}>
     */
    public function requests(): array
    {
        $lines = array_filter(explode("\n", (string) file_get_contents($this->logFile)));
        return array_values(array_map(
            static fn (string $line): array => json_decode($line, true, 512, JSON_THROW_ON_ERROR),
            $lines,
        ));
    }

    public function stop(): void
    {
        if (is_resource($this->process)) {
            proc_terminate($this->process, 9);
            proc_close($this->process);
        }
        if (is_file($this->logFile)) {
            unlink($this->logFile);
        }
    }

    public function __destruct()
    {
        $this->stop();
    }
}
