<?php
// Drives ouqiang's own PHP client (DelayQueue, Job, AbstractHandler, Container from a checkout
// given as OUQIANG_PHP_CLIENT) against the server at OUQIANG_SERVER, and prints what it saw as
// JSON. The checks are made by test/protocols/ouqiang-php.test.ts.

require __DIR__ . '/guzzle5.php';
require __DIR__ . '/psr-container.php';

$clientDir = getenv('OUQIANG_PHP_CLIENT');
spl_autoload_register(function ($class) use ($clientDir) {
    $prefix = 'DelayQueue\\';
    if (strpos($class, $prefix) === 0) {
        $file = $clientDir . '/src/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});

use DelayQueue\Container\Container;
use DelayQueue\DelayQueue;
use DelayQueue\Handler\AbstractHandler;
use DelayQueue\Job;

/** What the handlers did, for the report. */
class Seen
{
    public static $performed = [];
    public static $logged = [];
}

class OrderHandler extends AbstractHandler
{
    protected function perform()
    {
        Seen::$performed[] = ['id' => $this->id, 'body' => $this->body];
    }
}

class FailingHandler extends AbstractHandler
{
    protected function perform()
    {
        throw new Exception('the payment provider did not answer');
    }
}

class ListLogger
{
    public function __call($level, $arguments)
    {
        Seen::$logged[] = $level . ': ' . $arguments[0];
    }
}

function job($topic, $id, $delay, $ttr, array $body)
{
    $job = new Job();
    $job->setTopic($topic);
    $job->setId($id);
    $job->setDelay($delay);
    $job->setTtr($ttr);
    $job->setBody($body);
    return $job;
}

$label = getenv('LABEL');
$delayQueue = new DelayQueue(getenv('OUQIANG_SERVER'));
$delayQueue->setTimeout(30);
$container = new Container();
$container->set('logger', function () {
    return new ListLogger();
});
$container->set('delayQueue', function () use ($delayQueue) {
    return $delayQueue;
});
$report = [];

// Push, pop over two topics (blocking until due), run the handler, which finishes the job.
$body = ['uid' => 10829378, 'created' => 1498657365, 'note' => '订单 ✓ "quoted"'];
$pushedAt = microtime(true);
$delayQueue->push('OrderHandler', job("order-$label", "php-$label-1", 2, 30, $body));
$popped = $delayQueue->pop(["sms-$label", "order-$label"]);
$report['waited'] = microtime(true) - $pushedAt;
$report['popped'] = $popped;
$handler = new $popped['className']($container);
$handler->setId($popped['id']);
$handler->setBody($popped['body']);
$handler->run();

// A handler that throws: no finish, the job stays with the consumer until its TTR runs out.
$delayQueue->push('FailingHandler', job("order-$label", "php-$label-2", 1, 60, ['n' => 2]));
$failed = $delayQueue->pop(["order-$label"]);
$handler = new $failed['className']($container);
$handler->setId($failed['id']);
$handler->setBody($failed['body']);
$handler->run();
$report['failedId'] = $failed['id'];

// Delete before it is due.
$delayQueue->push('OrderHandler', job("order-$label", "php-$label-3", 3600, 60, ['n' => 3]));
$delayQueue->delete("php-$label-3");

// A refused push: the client throws the server's message.
try {
    $delayQueue->push('OrderHandler', job("bad topic $label", "php-$label-4", 10, 60, []));
    $report['refused'] = null;
} catch (Exception $exception) {
    $report['refused'] = $exception->getMessage();
}

$report['performed'] = Seen::$performed;
$report['logged'] = Seen::$logged;
echo json_encode($report, JSON_UNESCAPED_UNICODE), "\n";
